"""The probes of a regularisation path's refits: which top-k set of the path's ranking to refit
next, given the models compared so far
(:meth:`vflfs.strategies.path_progress.PathProgress.add_probe`).

:func:`next_probe` halves the gaps next to the winning model, :func:`denser_probe` doubles a
winner, and :func:`floor_probe` goes below a path that fell to no feature in one step; the
choice among the refits is :func:`vflfs.strategies.path_choice.choose_refit`.
"""

from __future__ import annotations

import math

from .path_choice import FINE_RATIO


def next_probe(
    kept: list[int], win: int, path_kept: list[int], shrunk: list[int] | None = None
) -> int | None:
    """How many of the ranking's top features to refit next, or None.

    ``kept``: the features of each model compared so far (the dense one first), ``win`` the one
    :func:`~vflfs.strategies.path_choice.choose_refit` picks, ``path_kept`` what the path's
    points keep (0: nothing). A probe halves (geometrically) a gap next to the winner, in this
    order: to the densest model sparser than the winner (it lost); else, when no sparser model
    was refit, to the next sparser path point (the penalty still shrank it when it was scored);
    then a gap of 1.5x or more to the next denser model or path point (the penalty's doubling
    may drop weak relevant features together with the noise); last, when nothing sparser was
    refit and the next sparser path point is too close to the winner to probe, past it to the
    first path point 1.2x sparser (a doubling can take a path from many columns to the relevant
    few in one point, scored while still shrunk). The dense model (``win`` 0) has no gap above.
    None once the gaps are closed.

    A path point that kept nothing (the penalty closed every feature) stands for a point of
    one feature: when the path falls from the winner's count, or from points within 1.2x of
    it, to none in one doubling and nothing sparser was refit, the probes go from the winner
    down toward 1 (the geometric middle, then halving the gaps as above; on real MADELON
    ``fedsdg_fs`` at gate noise 1.0 went from 59 columns to none). Where the path keeps a
    sparser, nonempty point further than that, the rules are as above.

    Before all these, ``shrunk``: the feature counts of refits that scored below their own
    path point by more than ``path.candidate_slack`` tolerances (the penalty's shrinkage, not
    the features, carried that point's score; its support holds many features the penalised
    model barely used). The first probe halves the gap from the sparsest of them down to the
    next sparser path point: on 1000 rows of 40 classes a group-lasso path went from 303
    columns to 20 in one doubling, the refit of the 303 scored 0.13 where the point had scored
    0.43, and the probes above bisected toward the dense model only.
    """
    a = kept[win]
    if a <= 0:
        return None
    path_kept = [k or 1 for k in path_kept]
    tried = set(kept)
    for b in sorted(shrunk or []):
        sparser = [k for k in path_kept if 0 < k < b]
        if sparser and b / max(sparser) >= FINE_RATIO and (k := _between(max(sparser), b, tried)):
            return k
    lost = [k for k in kept if 0 < k < a]
    below = lost or [k for k in path_kept if 0 < k < a]
    if below and a - (low := max(below)) >= 2 and a / low >= FINE_RATIO:
        return _between(low, a, tried)
    above = [k for k in [*kept, *path_kept] if k > a]
    if win > 0 and above and (up := min(above)) / a >= 1.5:
        return _between(a, up, tried)
    far = [k for k in path_kept if k > 0 and a / k >= FINE_RATIO]
    if not lost and far:
        return _between(max(far), a, tried)
    return None


# A path that falls to none from at least this many features in one step has left the range
# below them untried (:func:`floor_probe`).
FLOOR_FROM = 8


def floor_probe(kept: list[int], path_kept: list[int]) -> int | None:
    """The geometric middle between one feature and the path's last point that kept any,
    where the path fell from it (``FLOOR_FROM`` features or more) to none in one step and no
    model compared so far (``kept``) keeps fewer features; else None.

    Group lasso's path ends that way on most data: the columns' weights, stepped by Adam, have
    about the same norms, and the prox removes them together (in 113 of 133 recorded folds
    the last point that kept anything kept 8-1866 columns). Where a denser model wins the
    choice, :func:`next_probe` bisects between it and that point and never below it, though
    on a few hundred rows a model of a few columns can beat every denser one: on a regression
    of 256 training rows two folds reported 202 and 300 columns at R^2 -0.27 and 0.20, where
    the folds whose probes went below reached 2-3 columns at 0.31-0.43. The refit of that
    point itself does not count: where it lost, the probes stayed above it too (real
    MADELON, a fold of Table III's protocol: the path fell from 142 columns to none, the refit
    of the 142 scored 0.615 on validation, the probes of 166-388 columns 0.596-0.620, and the
    point's penalised model won at 0.683, 72.1% on test; the floor probe of 12 columns scored
    0.851, and its add-backs 0.870 with 14, 83.3% on test).
    """
    if len(path_kept) < 2 or path_kept[-1] != 0:
        return None
    last = next((k for k in reversed(path_kept) if k > 0), 0)
    if last < FLOOR_FROM or any(0 < k < last for k in kept):
        return None
    return round(math.sqrt(last))


def denser_probe(kept: list[int], win: int) -> int | None:
    """Twice the winner's features, when no model compared so far keeps about that many
    (1.5 to 2.5 times the winner's) and it is fewer than the dense model's; else None.

    The path scores a point while its penalty still shrinks the model, so the points denser
    than the winner can score below what their features' refit would reach, and
    :func:`next_probe` only fills the gaps up to the next denser path point. On real MADELON
    the default model reaches 85.5% on the top 15 columns of a Gini ranking (14 relevant)
    against 77-82% on the top 7-10, while a ``fedsdg_fs`` path's winner keeps 4-7: the choice
    can weigh the denser set only once it is refit (docs/selection_results.md).
    """
    a = kept[win]
    if win == 0 or a <= 0 or 2 * a >= kept[0]:
        return None
    if any(1.5 * a <= k <= 2.5 * a for k in kept):
        return None
    return 2 * a


def _between(low: int, high: int, tried: set[int]) -> int | None:
    """The geometric middle of ``low`` and ``high``, strictly between them, if not tried."""
    probe = min(max(round(math.sqrt(low * high)), low + 1), high - 1)
    return None if probe in tried else probe
