"""The regularisation path's settings, its points, and the validation rules that choose among them.

:class:`PathSettings` is ``strategy.path``; a :class:`PathPoint` records what the model keeps and
scores at one penalty; :func:`choose` is the one-standard-error rule, and :func:`candidates` the
few sparser points whose refits the choice compares (:mod:`vflfs.strategies.path`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np
from omegaconf import DictConfig

from vflfs.ml.metrics import mean_and_se
from vflfs.runtime.config import ConfigError
from vflfs.server_app.experiment import Experiment

from .settings import check_budget, feature_budget, typed


@dataclass(frozen=True)
class PathSettings:
    """``strategy.path``: how the penalty grows and how the model is chosen."""

    enabled: bool = True  # false: train at the strategy's fixed penalty (papers' protocol)
    warmup_patience: int = 2  # epochs without a better validation score that end warm-up,
    # once the dense model beats the majority class (before: training.patience, VFL.patience_over)
    warmup_max_epochs: int | None = None  # None: training.epochs
    start: float = 0.05  # first penalty, in the penalty's unit (PathStrategy.penalty_unit)
    growth: float = 2.0  # ratio of consecutive penalties
    fine_growth: float | None = None  # the ratio once a feature has left the path (None: growth)
    points: int = 12  # points after the dense one ...
    max_points: int = 30  # ... and more, up to this many, while the last is still good
    steps_per_point: int = 50  # optimiser steps per point at least (whole epochs)
    tolerance: float | None = None  # validation-score slack of the choice (None: in SEs)
    standard_errors: float = 1.0  # the slack in standard errors when tolerance is None
    max_features: int | None = None  # a budget: choose among points keeping at most this many
    max_fraction: float | None = None  # ... or this share of all features (the smaller of the two)
    refit: bool = True
    refit_dense: bool = True  # refit the dense point too: the plain model on every feature
    refit_candidates: int = 3  # refit this many points (1-SE, best, sparser ones)
    refit_probes: int = 3  # then refit this many selections of the ranking between them
    denser_probes: int = 2  # then refit up to this many of twice the winner's top features
    floor_probes: int = 1  # then this many below a last point that fell to none (path_probes)
    prior_probes: int = 1  # after the dense refit: a ranking made before the path (fedsdg_fs's
    # Gini scores), its top 2k, k the winner's count (or the last such probe's), this many
    candidate_slack: float = 3.0  # ... within this many tolerances of the best path score
    add_back: int = 2  # then refit up to this many winners plus the features their score test adds
    screen_alpha: float = 0.05  # ... the test's level, over the features tested (Bonferroni)
    refit_max_epochs: int | None = None  # None: 3 x training.epochs (early stopping ends it)
    refit_patience: int | None = None  # a refit's early stopping (None: 2 x training.patience)

    def __post_init__(self) -> None:
        if self.standard_errors < 0:
            raise ConfigError(
                f"strategy.path.standard_errors must be >= 0, got {self.standard_errors}"
            )
        check_budget("strategy.path", self.max_features, self.max_fraction)

    def for_features(self, total: int) -> PathSettings:
        """These settings for a run of ``total`` features: ``max_features`` the budget of both
        forms (:func:`~vflfs.strategies.settings.feature_budget`), which the path reads."""
        return replace(
            self, max_features=feature_budget(self.max_features, self.max_fraction, total)
        )

    @classmethod
    def from_cfg(cls, section: DictConfig | dict | None) -> PathSettings:
        """``strategy.path`` typed (:func:`~vflfs.strategies.settings.typed`): these defaults
        for the keys it leaves out (the one place they are set), unknown keys refused."""
        settings = typed(cls, section, "strategy.path")
        if not 0 < settings.screen_alpha <= 1 or settings.add_back < 0:
            raise ValueError(
                f"strategy.path.screen_alpha must be in (0, 1] and strategy.path.add_back >= 0, "
                f"got {settings.screen_alpha} and {settings.add_back}"
            )
        for key in ("refit_probes", "denser_probes", "floor_probes", "prior_probes"):
            if getattr(settings, key) < 0:
                raise ValueError(
                    f"strategy.path.{key} must be >= 0 (0: no such probes), "
                    f"got {getattr(settings, key)}"
                )
        if settings.refit_candidates < 1 or settings.candidate_slack < 1:
            raise ValueError(
                f"strategy.path.refit_candidates and strategy.path.candidate_slack must be >= 1, "
                f"got {settings.refit_candidates} and {settings.candidate_slack}"
            )
        fine = settings.growth if settings.fine_growth is None else settings.fine_growth
        if settings.growth <= 1 or fine <= 1 or settings.start <= 0:
            raise ValueError(
                f"strategy.path.growth and strategy.path.fine_growth must be > 1 and "
                f"strategy.path.start > 0, got {settings.growth}, {settings.fine_growth} and "
                f"{settings.start}"
            )
        return settings


@dataclass
class PathPoint:
    """One point of the path: the penalty and what the model keeps and scores there."""

    point: int
    penalty: float  # the penalty scale (0: the dense model)
    epoch: int  # the epoch that ended the point
    val_metric: float
    val_loss: float
    selected: list[list[int]]  # per party: local indices of the features in use
    components: list[list[int]]  # per party: embedding components the server reads
    mb: float
    top_k: int | None = None  # not a trained point: the path ranking's top features
    denser: bool = False  # a probe of twice the winner's features (path_probes.denser_probe)
    floor: bool = False  # a probe below the path's last point (path_probes.floor_probe)
    ranking: str = "path"  # a probe's ranking: the path's, the winning dense refit's, one
    # made before the path ("prior": fedsdg_fs's Gini scores), or
    # "screen": a winner plus the features its score test added (:mod:`.path_screen`);
    # "penalised": not a refit but the path's own model at the point (:func:`penalised_models`)
    parent: int | None = None  # an add-back's winner: its index among the models compared
    kept: int = field(init=False)

    def __post_init__(self) -> None:
        self.kept = sum(len(f) for f, c in zip(self.selected, self.components, strict=True) if c)

    @property
    def label(self) -> str:
        """How the log names it."""
        if self.ranking == "penalised":
            return f"path point {self.point}'s own (penalised) model"
        if not self.top_k:
            return f"path point {self.point}"
        if self.ranking == "screen":
            return f"a winner and the features its score test added ({self.top_k})"
        if self.ranking == "prior":
            return f"top {self.top_k} of the ranking made before the path"
        by = "the dense refit" if self.ranking == "dense" else "the path"
        return f"top {self.top_k} of {by}'s ranking"

    def row(self) -> dict:
        """The point's row in ``results.json``'s ``path`` (trained points: no probe fields)."""
        out = asdict(self)
        del out["top_k"], out["denser"], out["floor"], out["ranking"], out["parent"]
        out["per_party"] = [
            len(f) if c else 0 for f, c in zip(self.selected, self.components, strict=True)
        ]
        out["components_kept"] = [len(c) for c in self.components]
        return out


# Accuracies are counts of validation rows over the rows, so a score can sit exactly ``slack``
# below the best (one row, at the standard error's floor of one row), where floating point's
# rounding of ``best - slack`` can put it outside: 95/96 - 1/96 > 94/96.
ROUNDING = 1e-9


def is_within(score: float, best: float, slack: float) -> bool:
    """Whether ``score`` is at most ``slack`` below ``best`` (up to rounding)."""
    return score >= best - slack - ROUNDING


def tolerance(
    setting: float | None, experiment: Experiment, best: float, standard_errors: float = 1.0
) -> float:
    """A validation choice's slack: ``setting``, else ``standard_errors`` standard errors of
    the best validation score (binomial for accuracy; for R^2 a standard error is taken as one
    hundredth). Fewer standard errors choose denser, more accurate models where the
    validation rows are few (the glmnet "lambda.1se" rule at 1; "lambda.min" at 0).

    The standard error is never below one validation row. Where it is at that floor (the best
    model misses about one row or none: ``p (1 - p) < 1 / n``) any slack above zero is the
    whole row: half of it would leave only the models that tie the best, where a model one row
    behind shows nothing. Elsewhere a fraction of a standard error stands; on a few dozen
    validation rows it keeps the choice denser than one row would, which is what it is for."""
    if setting is not None:
        return float(setting)
    if experiment.task.kind != "classification":
        return 0.01 * standard_errors
    n = max(len(experiment.splits.val), 1)
    p = min(max(best, 0.0), 1.0)
    if p * (1 - p) < 1.0 / n:  # the standard error at its floor of one row
        return max(standard_errors, 1.0) / n if standard_errors > 0 else 0.0
    return standard_errors * math.sqrt(p * (1 - p) / n)


def choose(points: list[PathPoint], slack: float, max_features: int | None) -> PathPoint:
    """The sparsest point within ``slack`` of the best validation score (within the budget
    when one is set; the best-scoring point within it, else the sparsest, when none is)."""
    within = [p for p in points if max_features is None or p.kept <= max_features]
    if not within:
        return min(points, key=lambda p: (p.kept, -p.val_metric))
    best = max(p.val_metric for p in within)
    good = [p for p in within if is_within(p.val_metric, best, slack)]
    return min(good, key=lambda p: (p.kept, -p.val_metric, p.point))


def candidates(
    points: list[PathPoint], chosen: PathPoint, slack: float, settings: PathSettings
) -> list[PathPoint]:
    """The points whose refits the final choice compares, densest first.

    Along the path a model is scored while its penalty still shrinks it, so a sparse point
    often scores below denser ones that its refit, free of the penalty, matches, and the
    best-scoring point is not always the best selection either. The candidates are ``chosen``
    (the one-standard-error point), the best-scoring point, and the sparsest points with fewer
    features than the best whose score is within ``candidate_slack`` tolerances of it: at
    most ``refit_candidates`` in all, one per distinct selection, none empty.
    """
    within = [
        p
        for p in points
        if p.kept > 0 and (settings.max_features is None or p.kept <= settings.max_features)
    ]
    best = max(within, key=lambda p: (p.val_metric, -p.kept), default=chosen)
    margin = settings.candidate_slack * slack
    picked = [chosen]
    seen = {_selection_key(chosen)}
    near = sorted(
        (
            p
            for p in within
            if p.kept < best.kept and is_within(p.val_metric, best.val_metric, margin)
        ),
        key=lambda p: (p.kept, -p.val_metric, p.point),
    )
    for p in [best, *near]:
        key = _selection_key(p)
        if len(picked) < settings.refit_candidates and key not in seen:
            seen.add(key)
            picked.append(p)
    return sorted(picked, key=lambda p: -p.kept)


def choose_refit(
    scores: list[tuple[PathPoint, float]],
    slack: float,
    losses: list[np.ndarray | None] | None = None,
) -> int:
    """Index of the sparsest good model (the dense model is one, with its warm-up score: it
    is never refit).

    Good: its validation score is within ``slack`` of the best, and, given each model's
    per-sample validation ``losses``, its mean loss exceeds the lowest mean loss by at most
    one standard error of the paired differences. The models score the same rows, so the
    paired comparison sees a model that misses a relevant feature where the two scores'
    own standard errors, each about ``slack``, would not.

    A good add-back (:mod:`~vflfs.strategies.path_screen`) replaces the model it extends: the
    features it adds passed a score test of their own on the training rows, so validation
    need only find it as good, not better.
    """
    good = good_models(scores, slack, losses)
    win = min(good, key=lambda i: (scores[i][0].kept, -scores[i][1]))
    for i, (point, _) in enumerate(scores):
        if point.ranking == "screen" and point.parent == win and i in good:
            win = i
    return win


def penalised_models(
    points: list[PathPoint],
    scores: list[tuple[PathPoint, float]],
    slack: float,
    max_features: int | None = None,
) -> list[int]:
    """The path points (indices into ``points``, the dense one never) whose own, penalised
    models join the final choice beside the refits: those keeping a feature (within the
    budget) that score above every model compared (``scores``: the dense model and the
    refits) by more than ``slack``.

    A refit trains a point's features afresh, without the penalty. Where the penalty's
    shrinkage, not the features alone, carried the point's score, the refit loses it: on 1000
    rows of 40 classes the group-lasso path's point of 303 columns scored 0.43 on validation,
    its refit 0.13, and no refit nor the dense model more than 0.18. A path point's model is
    a trained model like the others, scored on the same validation rows, and it uses only the
    features it keeps (a closed gate or a zero group passes nothing), so the choice may
    report it. Elsewhere the refits score above the points that shrank, and nothing is added.
    """
    best = max(score for _, score in scores)
    return [
        k
        for k, p in enumerate(points)
        if k > 0
        and p.kept > 0
        and (max_features is None or p.kept <= max_features)
        and not is_within(best, p.val_metric, slack)
    ]


def good_models(
    scores: list[tuple[PathPoint, float]],
    slack: float,
    losses: list[np.ndarray | None] | None = None,
) -> list[int]:
    """The models :func:`choose_refit` chooses among (never none)."""
    return good_scores([score for _, score in scores], slack, losses)


def good_scores(
    metrics: list[float], slack: float, losses: list[np.ndarray | None] | None = None
) -> list[int]:
    """Indices of the models within ``slack`` of the best validation score and, given every
    model's per-sample validation ``losses``, within one standard error of the paired
    differences to the lowest mean loss, or within :data:`PAIRED_FLOOR` of it, the largest
    difference counted as the second largest (:func:`_within_paired`; never none)."""
    best = max(metrics)
    good = [i for i, score in enumerate(metrics) if is_within(score, best, slack)]
    if losses is not None and all(v is not None and len(v) > 1 for v in losses):
        ref = min(range(len(metrics)), key=lambda i: float(np.mean(losses[i])))
        paired = [i for i in good if _within_paired(losses[i], losses[ref])]
        good = paired or good
    return good


# Counts of features within this ratio of each other are not worth another training between
# them: the probes between refits stop there (:func:`~.path_probes.next_probe`), as does the
# filters' count bisection (:func:`vflfs.strategies.count_ladder.bisect`).
FINE_RATIO = 1.2

# Per-sample loss differences below this are ties (nats, or squared standardised errors): where
# every model classifies the validation rows perfectly, their mean losses differ by 1e-5 and
# one standard error of that is smaller still, so the most confident model would be the only
# good one, however many features it keeps.
PAIRED_FLOOR = 1e-3


def _within_paired(losses: np.ndarray, reference: np.ndarray) -> bool:
    """Whether ``losses`` exceed ``reference``'s by at most one standard error of the paired
    differences (or :data:`PAIRED_FLOOR`), the largest difference counted as the second
    largest.

    One row alone cannot show that a model is worse: a difference on one row is exactly one
    standard error of itself (mean d/n, standard error d/n), so a trifle on the other rows
    decided. At a near-perfect score that row is one that both models get wrong, or nearly,
    and how confidently wrong is not what the comparison asks: on mushrooms a refit of 51 of
    98 columns tied the dense model's score and lost by 0.0027 nats a row against a standard
    error of 0.0025, 3.2 nats of it on one row of 1300, the next largest 0.16. Two such rows
    still count.
    """
    diff = np.asarray(losses, np.float64) - np.asarray(reference, np.float64)
    if len(diff) > 2:
        second, first = np.argsort(diff)[-2:]
        diff[first] = diff[second]
    excess, se = mean_and_se(diff)
    return excess <= max(se, PAIRED_FLOOR)


def refit_rows(
    scores: list[tuple[PathPoint, float]],
    losses: list[np.ndarray | None],
    good: list[int],
    epochs: list[tuple[int, int]],
) -> list[dict]:
    """``results.json``'s record of each refit (the dense model, first, is not one);
    ``epochs``: each model's first epoch and the one after its last."""
    return [
        {
            "point": p.point,
            "top_k": p.top_k,
            "kept": p.kept,
            "val_metric": score,
            "val_loss": None if loss is None else float(np.mean(loss)),
            "good": i in good,
            "epochs": list(span),
            **({"ranking": p.ranking} if p.top_k or p.ranking == "penalised" else {}),
        }
        for i, ((p, score), loss, span) in enumerate(zip(scores, losses, epochs, strict=True))
        if i > 0
    ]


def _selection_key(point: PathPoint) -> tuple:
    return tuple(
        (tuple(f), tuple(c)) if c and f else ((), ())
        for f, c in zip(point.selected, point.components, strict=True)
    )
