"""Selection along a regularisation path: dense warm-up, path, validation choice, refit.

The shape of LassoNet's path (Lemhadri, Ruan, Abraham and Tibshirani, "LassoNet: A Neural
Network with Feature Sparsity", JMLR 2021), applied to the gate and lasso penalties of VFL:

1. **Dense warm-up.** The penalty stays at zero until the dense model's validation score stops
   improving (``path.warmup_patience`` epochs), so nothing closes before the loss has moved.
2. **Path.** The penalty grows geometrically, ``start * growth^k`` in units of the dense
   model's training loss (so one setting serves 2 or 26 classes; the gates' mean-reduced
   regulariser makes it independent of the column count). Each point trains at least
   ``path.steps_per_point`` optimiser steps, warm-started from the last, and records its
   validation score, the features and embedding components each party keeps, and the MB so
   far. The path ends when nothing is left, when a feature budget is met and the score has
   dropped, or after ``path.points`` points.
3. **Choice.** The sparsest point whose validation score is within ``path.tolerance`` of the
   best point's (default: one binomial standard error of that score on the validation rows;
   the dense model is a point, so the choice is never worse than it by more than that).
4. **Refit.** The parties rebuild their bottom models on the chosen features and components
   only (layers shrunk, no gates, no penalty), the server its top model, and VFL trains them
   with early stopping on validation. If the refit ends below the dense model by more than
   the tolerance, the dense model is reported instead, and the run says so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

import numpy as np
from omegaconf import DictConfig

from vflfs.federation import MB, Federation
from vflfs.protocol import IMPORTANCE, PENALTY, SELECTION, PenaltyRequest
from vflfs.server_app.experiment import Experiment

from .interactive import make_layer
from .result import RunResult
from .strategy import EpochCallback, Strategy, log
from .vfl import VFL


@dataclass(frozen=True)
class PathSettings:
    """``strategy.path``: how the penalty grows and how the model is chosen."""

    enabled: bool = True  # false: train at the strategy's fixed penalty (papers' protocol)
    warmup_patience: int = 2  # dense epochs without a better validation score that end warm-up
    warmup_max_epochs: int | None = None  # None: training.epochs
    start: float = 0.05  # first penalty, in units of the dense model's training loss
    growth: float = 2.0  # ratio of consecutive penalties
    points: int = 12  # at most this many points after the dense one
    steps_per_point: int = 50  # optimiser steps per point at least (whole epochs)
    tolerance: float | None = None  # validation-score slack of the choice (None: 1 SE)
    max_features: int | None = None  # a budget: choose among points keeping at most this many
    refit: bool = True
    refit_max_epochs: int | None = None  # None: training.epochs (early stopping ends it sooner)

    @classmethod
    def from_cfg(cls, section: DictConfig | dict | None) -> PathSettings:
        given = dict(section or {})
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - names)
        if unknown:
            raise ValueError(
                f"unknown strategy.path keys {unknown}; the settings are {sorted(names)}"
            )
        settings = cls(**given)
        if settings.growth <= 1 or settings.start <= 0:
            raise ValueError(
                f"strategy.path.growth must be > 1 and strategy.path.start > 0, got "
                f"{settings.growth} and {settings.start}"
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
    kept: int = field(init=False)

    def __post_init__(self) -> None:
        self.kept = sum(len(f) for f, c in zip(self.selected, self.components, strict=True) if c)

    def row(self) -> dict:
        out = asdict(self)
        out["per_party"] = [
            len(f) if c else 0 for f, c in zip(self.selected, self.components, strict=True)
        ]
        out["components_kept"] = [len(c) for c in self.components]
        return out


def tolerance(setting: float | None, experiment: Experiment, best: float) -> float:
    """A validation choice's slack: ``setting``, else one standard error of the best
    validation score (binomial for accuracy; for R^2 one hundredth)."""
    if setting is not None:
        return float(setting)
    if experiment.task.kind != "classification":
        return 0.01
    n = max(len(experiment.splits.val), 1)
    p = min(max(best, 0.0), 1.0)
    return math.sqrt(max(p * (1 - p), 1.0 / n) / n)


def choose(points: list[PathPoint], slack: float, max_features: int | None) -> PathPoint:
    """The sparsest point within ``slack`` of the best validation score (within the budget
    when one is set; the best-scoring point within it, else the sparsest, when none is)."""
    within = [p for p in points if max_features is None or p.kept <= max_features]
    if not within:
        return min(points, key=lambda p: (p.kept, -p.val_metric))
    best = max(p.val_metric for p in within)
    good = [p for p in within if p.val_metric >= best - slack]
    return min(good, key=lambda p: (p.kept, -p.val_metric, p.point))


class PathStrategy(VFL):
    """VFL whose penalty (gates or lasso) follows a regularisation path, then a refit."""

    name = Strategy.name  # a skeleton: not a strategy of its own (else it would replace vfl)
    refitting = False

    def __init__(self, cfg: DictConfig) -> None:
        super().__init__(cfg)
        self.path = PathSettings.from_cfg(cfg.strategy.get("path"))
        self.patience: int | None = None

    # -- what a subclass provides ---------------------------------------------------------
    def set_penalty(self, federation: Federation, scale: float) -> None:
        """Every party (and the server, for a server-side penalty) to penalty ``scale``."""
        federation.broadcast(PENALTY, PenaltyRequest(scale=scale))

    def current_selection(self, federation: Federation) -> tuple[list[list[int]], list[list[int]]]:
        """Per party: the features its model uses now, and the embedding components the
        server reads from it."""
        replies = federation.broadcast(SELECTION)
        selected = [np.asarray(r.selected).tolist() for r in replies]
        components = [np.asarray(r.components).tolist() for r in replies]
        return selected, components

    # -- the loop ---------------------------------------------------------------------------
    def fit(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
    ) -> None:
        if not self.path.enabled:
            super().fit(federation, experiment, result, on_epoch)
            return
        self.before_training(federation, experiment, result)
        epoch = self.warm_up(federation, experiment, result, on_epoch)
        dense = result.best
        dense_selection = [list(p.chosen()) for p in result.parties]
        points = [self.point(federation, result, 0, 0.0, dense)]
        unit = max(float(dense.get("train_loss", 1.0)), 1e-3)
        per_point = self.epochs_per_point(experiment)
        for k in range(self.path.points):
            scale = self.path.start * self.path.growth**k * unit
            with federation.traffic.in_phase("training"):
                self.set_penalty(federation, scale)
            self.patience = None
            self.run_epochs(federation, experiment, result, on_epoch, epoch, epoch + per_point)
            epoch += per_point
            points.append(self.point(federation, result, k + 1, scale, result.history[-1]))
            log.info(
                "path point %d: penalty %.4g, validation %.4f, %d features kept",
                k + 1,
                scale,
                points[-1].val_metric,
                points[-1].kept,
            )
            if self.path_done(points, experiment):
                break
        slack = tolerance(self.path.tolerance, experiment, max(p.val_metric for p in points))
        chosen = choose(points, slack, self.path.max_features)
        result.extra["path"] = [p.row() for p in points]
        result.extra["path_choice"] = {"point": chosen.point, "tolerance": slack}
        log.info(
            "chosen: path point %d (penalty %.4g): %d features, validation %.4f",
            chosen.point,
            chosen.penalty,
            chosen.kept,
            chosen.val_metric,
        )
        if self.path.refit:
            self.refit(federation, experiment, result, on_epoch, epoch, chosen)
            refit_best = result.best
            if refit_best["val_metric"] < dense["val_metric"] - slack:
                log.warning(
                    "the refit model (validation %.4f) is worse than the dense model (%.4f) by "
                    "more than the tolerance %.4f: reporting the dense model",
                    refit_best["val_metric"],
                    dense["val_metric"],
                    slack,
                )
                result.best_from, result.best_to = 0, dense["epoch"] + 1
                for p, sel in zip(result.parties, dense_selection, strict=True):
                    p.selected_at_best, p.components = sel, None
                result.extra["path_choice"]["fallback"] = "dense"

    def warm_up(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
    ) -> int:
        """Dense epochs (penalty 0) until the validation score stops improving; returns the
        next epoch's number."""
        self.patience, self.stage = self.path.warmup_patience, "warmup"
        stop = self.path.warmup_max_epochs or int(self.cfg.training.epochs)
        self.start_reliably(federation, experiment, result, on_epoch, stop)
        self.stage = "path"
        return len(result.history)

    def epochs_per_point(self, experiment: Experiment) -> int:
        t = self.cfg.training
        steps = math.ceil(len(experiment.splits.train) / int(t.batch_size))
        return max(1, math.ceil(self.path.steps_per_point / max(steps, 1)))

    def point(
        self, federation: Federation, result: RunResult, k: int, scale: float, row: dict
    ) -> PathPoint:
        selected, components = self.current_selection(federation)
        if k == 0:  # the dense model: as it was at its best epoch
            selected = [list(p.chosen()) for p in result.parties]
        return PathPoint(
            point=k,
            penalty=scale,
            epoch=int(row["epoch"]),
            val_metric=float(row["val_metric"]),
            val_loss=float(row["val_loss"]),
            selected=selected,
            components=components,
            mb=federation.traffic.total_bytes() / MB,
        )

    def path_done(self, points: list[PathPoint], experiment: Experiment) -> bool:
        """Nothing is left; or a budget is met and the score has fallen well below the best.

        Without a budget the path goes on through dips: the score often recovers once the
        noise features are gone.
        """
        last, budget = points[-1], self.path.max_features
        if last.kept == 0:
            return True
        if budget is None or last.kept > budget:
            return False
        best = max(p.val_metric for p in points)
        return last.val_metric < best - 3 * tolerance(self.path.tolerance, experiment, best)

    def stop_early(self, epoch: int, result: RunResult) -> bool:
        """Warm-up and refit stop on validation; a path point always runs to its end."""
        if not self.path.enabled:
            return super().stop_early(epoch, result)
        if self.patience is None:
            return False
        return epoch - result.best["epoch"] >= self.patience

    # -- refit ------------------------------------------------------------------------------
    def party_spec(self, experiment: Experiment, m: int) -> dict:
        """While refitting: the plain VFL party on the chosen features and components."""
        if self.refitting:
            spec = VFL.party_spec(self, experiment, m)
            spec["keep"] = self.refit_keep[m]
            return spec
        spec = super().party_spec(experiment, m)
        if self.path.enabled:
            spec["penalty_scale"] = 0.0  # the dense warm-up
        return spec

    def within_budget(self, federation: Federation, chosen: PathPoint) -> list[list[int]]:
        """The chosen point's features, cut to ``path.max_features`` by the parties' own
        importance (gate or input-column norm) when the path never came within the budget."""
        budget = self.path.max_features
        if budget is None or chosen.kept <= budget:
            return chosen.selected
        values = [np.asarray(r.values) for r in federation.broadcast(IMPORTANCE)]
        ranked = sorted(
            (float(v[f]), m, f)
            for m, (v, sel, c) in enumerate(
                zip(values, chosen.selected, chosen.components, strict=True)
            )
            if c
            for f in sel
        )[::-1][:budget]
        log.info("the path ended above the budget: keeping the %d most important features", budget)
        return [sorted(f for _, n, f in ranked if n == m) for m in range(len(values))]

    def refit(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
        epoch: int,
        chosen: PathPoint,
    ) -> None:
        """Fresh models on the chosen features and components, trained without penalty."""
        selected = self.within_budget(federation, chosen)
        self.refitting, self.stage = True, "refit"
        # A party that keeps no feature sends nothing, and one whose components are all
        # closed keeps no feature: neither could change the prediction.
        self.refit_keep = [
            {"features": f if c else [], "components": c if f else []}
            for f, c in zip(selected, chosen.components, strict=True)
        ]
        with federation.traffic.in_phase("setup"):
            self.setup_parties(federation, experiment)
        self.widths = [len(keep["components"]) for keep in self.refit_keep]
        self.server = VFL.make_server_model(self, experiment)
        self.layer = make_layer(self.cfg, federation, experiment, self.server)
        for p, keep in zip(result.parties, self.refit_keep, strict=True):
            p.selected = list(keep["features"])
            p.selected_at_best = None
            p.components = len(keep["components"])
        result.best_from = epoch
        self.patience = self.cfg.training.get("patience")
        self.patience = 5 if self.patience is None else int(self.patience)
        epochs = self.path.refit_max_epochs or int(self.cfg.training.epochs)
        self.run_epochs(federation, experiment, result, on_epoch, epoch, epoch + epochs)
