"""The counts a count choice tries, and how it picks among them
(:mod:`vflfs.strategies.filter_choice`): d, d/2, ... 1, the halving's stop, the smallest
good count, the bisection between two counts, and the choice's settings
(``strategy.select``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vflfs.runtime.config import ConfigError
from vflfs.server_app.experiment import Experiment

from .path import tolerance
from .path_choice import FINE_RATIO, good_scores, is_within
from .settings import check_budget


@dataclass
class Candidate:
    """One kept count and how its training went."""

    k: int
    kept: list[np.ndarray]  # per party: local indices of its features among the best k
    first: int  # its first epoch
    stop: int  # one past its last epoch
    val_metric: float = float("nan")
    mb: float = 0.0
    val_losses: np.ndarray | None = None  # each validation sample's loss at its lowest mean
    good: bool = False  # among the counts the choice picks from
    dense: bool = False  # a model on every feature trained before the choice (not here)
    plain: bool = False  # strategy=vfl's model, trained as that run trains it
    reopened: tuple[int, ...] = ()  # parties whose every component it reads again (LESS-VFL)
    same_as: int | None = None  # the count tried before whose model this one's is (not trained)

    def row(self) -> dict:
        return {
            "k": self.k,
            "dense": self.dense,
            "plain": self.plain,
            "reopened": list(self.reopened),
            "same_as": self.same_as,
            "per_party": [len(k) for k in self.kept],
            "epochs": [self.first, self.stop],
            "val_metric": self.val_metric,
            "val_loss": None if self.val_losses is None else float(np.mean(self.val_losses)),
            "good": self.good,
            "mb": self.mb,
        }


def counts(total: int, budget: int | None) -> list[int]:
    """d, d/2, d/4, ... 1 (rounded up), within ``budget`` (which is itself a count)."""
    top = total if budget is None else min(total, int(budget))
    out = []
    k = top
    while k >= 1:
        if k not in out:
            out.append(k)
        k = k // 2 if k > 1 else 0
    return out


# The halving stops once FAR_IN_A_ROW counts in a row score more than FAR standard errors (or
# FAR tolerances, if larger) below the best count so far: each smaller count keeps fewer of
# the same ranked features, and on text sets the counts below such a fall (a tenth of the
# columns and fewer) took over half of the count choice's epochs.
FAR, FAR_IN_A_ROW = 3.0, 2


def fallen_short(
    tried: list[Candidate], experiment: Experiment, setting: float | None, standard_errors: float
) -> bool:
    """Whether the last :data:`FAR_IN_A_ROW` counts tried scored more than :data:`FAR` times
    the tolerance (at least one standard error) below the best count so far."""
    if len(tried) <= FAR_IN_A_ROW:
        return False
    best = max(c.val_metric for c in tried)
    far = FAR * tolerance(setting, experiment, best, max(standard_errors, 1.0))
    return all(not is_within(c.val_metric, best, far) for c in tried[-FAR_IN_A_ROW:])


def halve(
    ladder: list[int],
    tried: list[Candidate],
    attempt: Callable[[int], Candidate],
    experiment: Experiment,
    s: CountSettings,
) -> list[int]:
    """Try the counts of ``ladder`` in turn until they have :func:`fallen_short`; returns
    those not tried."""
    for i, k in enumerate(ladder):
        if fallen_short(tried, experiment, s.tolerance, s.standard_errors):
            return ladder[i:]
        attempt(k)
    return []


def best_k(ranks: list[np.ndarray], k: int) -> list[np.ndarray]:
    """Per party: local indices of its features among the k best overall (rank < k)."""
    return [np.flatnonzero(r < k).astype(np.int64) for r in ranks]


def smallest_good(
    tried: list[Candidate], experiment: Experiment, setting: float | None, standard_errors: float
) -> tuple[Candidate, float]:
    """The smallest good count: its validation score within the tolerance of the best, and
    its validation loss, sample by sample, within one standard error of the lowest
    (:func:`~vflfs.strategies.path_choice.good_scores`). Of two good candidates on the same
    features, the one that reads fewer parties' every component (``reopened``) is smaller."""
    best = max(c.val_metric for c in tried)
    slack = tolerance(setting, experiment, best, standard_errors)
    good = set(good_scores([c.val_metric for c in tried], slack, [c.val_losses for c in tried]))
    for i, c in enumerate(tried):
        c.good = i in good
    return min((c for c in tried if c.good), key=lambda c: (c.k, len(c.reopened))), slack


def bisect(
    tried: list[Candidate], chosen: Candidate, slack: float, attempt: Callable[[int], Candidate]
) -> None:
    """Try the counts between ``chosen`` and the next smaller count tried (which fell short),
    halving the interval: a good count (:func:`good_scores` among those tried so far) becomes
    its upper end. It stops once the ends are within :data:`FINE_RATIO` of each other: each
    count tried is one more chance for a sparser count to pass the tolerance by chance, and
    on thousands of features a bisection to a gap of one tried 9-12 counts."""
    below = [c.k for c in tried if c.k < chosen.k]
    lo, hi = (max(below) if below else 0), chosen.k
    while hi - lo > 1 and hi >= FINE_RATIO * lo:
        mid = (lo + hi) // 2
        attempt(mid)
        metrics, losses = [c.val_metric for c in tried], [c.val_losses for c in tried]
        good = len(tried) - 1 in good_scores(metrics, slack, losses)
        lo, hi = (lo, mid) if good else (mid, hi)


@dataclass(frozen=True)
class CountSettings:
    """``strategy.select``: the count's choice (:mod:`vflfs.strategies.filter_choice`). The
    YAML files hold the first four and ``standard_errors``; ``refine`` and ``refit_patience``
    are off unless one sets them."""

    patience: int  # epochs without a better validation score that end one count's training
    max_epochs: int | None  # None: training.epochs
    tolerance: float | None  # None: standard_errors standard errors of the best score
    max_features: int | None  # a budget: try only counts up to it
    standard_errors: float = 1.0  # the slack in standard errors when tolerance is None
    max_fraction: float | None = None  # a budget as a share of all features (the smaller one)
    refine: bool = False  # then bisect between the chosen count k and k/2, to ends within 1.2x
    refit_patience: int | None = None  # then the chosen count once more with this patience

    def __post_init__(self) -> None:
        if self.standard_errors < 0:
            raise ConfigError(
                f"strategy.select.standard_errors must be >= 0, got {self.standard_errors}"
            )
        check_budget("strategy.select", self.max_features, self.max_fraction)
