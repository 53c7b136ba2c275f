"""Selection along a regularisation path: dense warm-up, path, validation choice, refit.

The shape of LassoNet's path (Lemhadri, Ruan, Abraham and Tibshirani, "LassoNet: A Neural
Network with Feature Sparsity", JMLR 2021), applied to the gate and lasso penalties of VFL:

1. **Dense warm-up.** The penalty stays at zero until the dense model's validation score stops
   improving (``path.warmup_patience`` epochs), so nothing closes before the loss has moved.
2. **Path.** The penalty grows geometrically from ``start``, by ``growth`` per point
   (``fine_growth`` once a feature has left the path), in units of the dense model's training
   loss for the gates (so one setting serves 2 or 26 classes; the gates' mean-reduced
   regulariser makes it independent of the column count; :meth:`PathStrategy.penalty_unit`,
   which group lasso with Adam overrides). Each point
   trains at least ``path.steps_per_point`` optimiser steps, warm-started from the last, and
   records its validation score, the features and embedding components each party keeps, and
   the MB so far. The path ends when nothing is left, when a feature budget is met and the score has
   dropped, or after ``path.points`` points; past them it goes on (up to ``path.max_points``)
   while its last point still scores within the tolerance of the best, so that a model the
   penalty could not yet hurt (one that fits its training rows, whose loss sets the penalty's
   unit) is never the path's end.
3. **Choice.** The sparsest point whose validation score is within ``path.tolerance`` of the
   best point's (default: one binomial standard error of that score on the validation rows;
   the dense model is a point, so the choice is never worse than it by more than that).
4. **Refit.** Candidates near the choice, probes of the path's ranking and the dense model
   are refit without penalty, and the sparsest good model is reported, or its refit with the
   features a score test finds it misses (:mod:`vflfs.strategies.path_refit`,
   :mod:`vflfs.strategies.path_screen`), or a path point's own model where the penalty
   carried a score that no refit reached.
"""

from __future__ import annotations

import math

import numpy as np
from omegaconf import DictConfig

from vflfs.federation import MB, Federation
from vflfs.protocol import PENALTY, SELECTION, PenaltyRequest
from vflfs.runtime.settings import RunSettings
from vflfs.server_app.experiment import Experiment

from .checkpoint_hooks import resuming
from .early_stopping import learned_level
from .path_choice import PathPoint, PathSettings, candidates, choose, is_within, tolerance
from .path_progress import Fitted, PathProgress, Refits
from .path_refit import PathRefits
from .result import RunResult
from .strategy import EpochCallback, Strategy, log
from .vfl import VFL, party_importance


class PathStrategy(PathRefits, VFL):
    """VFL whose penalty (gates or lasso) follows a regularisation path, then a refit."""

    name = Strategy.name  # a skeleton, not registered: not a strategy of its own
    dense: Fitted  # the warm-up's model
    progress: PathProgress | None = None  # how far the path has come (kept by checkpoints)
    learned_above: float | None = None  # the warm-up's learned_level (steps floor until then)

    def __init__(self, cfg: DictConfig, run_settings: RunSettings | None = None) -> None:
        super().__init__(cfg, run_settings)
        self.path = PathSettings.from_cfg(cfg.strategy.get("path"))
        self.patience: int | None = None

    # -- what a subclass provides ---------------------------------------------------------
    def set_penalty(self, federation: Federation, scale: float) -> None:
        """Every party (and the server, for a server-side penalty) to penalty ``scale``."""
        federation.broadcast(PENALTY, PenaltyRequest(scale=scale))

    def penalty_unit(self, dense: dict) -> float:
        """The penalty's unit: the dense model's training loss (``dense``: its best epoch's
        row). A gate's penalty gradient meets the loss's gradient in the same optimiser step,
        so their ratio, not the penalty alone, decides whether the gate closes."""
        return max(float(dense.get("train_loss", 1.0)), 1e-3)

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
        self.path = self.path.for_features(sum(p.n_features for p in result.parties))
        # A resumed run (strategies/checkpoint.py) has its progress back and skips what it did.
        if self.progress is None:
            if not resuming(self):
                self.before_training(federation, experiment, result)
            epoch = self.warm_up(federation, experiment, result, on_epoch)
            dense = result.first_best  # the warm-up's reported epoch (reported_row)
            self.dense = Fitted.now(
                federation, result, 0, dense["epoch"] + 1, self.val_losses_at_lowest
            )
            self.reported = None
            unit = self.penalty_unit(dense)
            self.progress = PathProgress(
                points=[self.point(federation, result, 0, 0.0, dense)],
                unit=unit,
                epoch=epoch,
                scale=self.path.start * unit,
            )
            first = self.progress.points[0]
            values = [d["values"] for d in self.dense.importance]
            self.progress.ranking.update(0, first.selected, first.components, values)
        progress = self.progress
        if not self.refitting:
            self.follow_path(federation, experiment, result, on_epoch, progress)
            if not self.choose_point(federation, experiment, result, progress):
                return
        self.refit_candidates(federation, experiment, result, on_epoch, progress)

    def follow_path(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
        progress: PathProgress,
    ) -> None:
        """The path's points after the dense one, from ``progress.k`` on."""
        per_point = self.epochs_per_point(experiment)
        points = progress.points
        for k in range(progress.k, max(self.path.points, self.path.max_points)):
            scale = progress.scale
            if not resuming(self):  # a resumed point has its penalty already
                with federation.traffic.in_phase("training"):
                    self.set_penalty(federation, scale)
            self.patience = None
            epoch = progress.epoch
            self.run_epochs(federation, experiment, result, on_epoch, epoch, epoch + per_point)
            progress.epoch, progress.k = epoch + per_point, k + 1
            points.append(self.point(federation, result, k + 1, scale, result.history[-1]))
            importance = party_importance(federation)
            values = [d["values"] for d in importance]
            progress.ranking.update(k + 1, points[-1].selected, points[-1].components, values)
            progress.models.append(Fitted.at_point(points[-1], importance, self.val_losses))
            log.info(
                "path point %d: penalty %.4g, validation %.4f, %d features kept",
                k + 1,
                scale,
                points[-1].val_metric,
                points[-1].kept,
            )
            if self.path_done(points, experiment):
                break
            progress.scale = scale * self.growth(points)

    def growth(self, points: list[PathPoint]) -> float:
        """The next penalty's ratio to the last: ``path.fine_growth`` once the path has
        removed a feature (where a doubling can take it from many features to few), else
        ``path.growth``."""
        fine = self.path.fine_growth
        return fine if fine is not None and points[-1].kept < points[0].kept else self.path.growth

    def choose_point(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        progress: PathProgress,
    ) -> bool:
        """The path's choice (:func:`choose`); with ``path.refit``, the candidates to refit
        (in ``progress.refits``) and True."""
        points = progress.points
        progress.slack = slack = tolerance(
            self.path.tolerance,
            experiment,
            max(p.val_metric for p in points),
            self.path.standard_errors,
        )
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
        if not self.path.refit:
            return False
        pool = [p for p in candidates(points, chosen, slack, self.path) if p.point != 0]
        keeps = [self.within_budget(federation, point) for point in pool]
        scores = [(points[0], points[0].val_metric)]
        progress.refits = Refits(pool, keeps, [self.dense], scores)
        return True

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
        level = learned_level(experiment)
        self.learned_above = -math.inf if level is None else level  # regression: epochs only
        stop = self.path.warmup_max_epochs or self.training.epochs
        self.start_reliably(federation, experiment, result, on_epoch, stop)
        self.stage, self.warmup_restarts = "path", self.restarts
        return len(result.history)

    def epochs_per_point(self, experiment: Experiment) -> int:
        steps = math.ceil(len(experiment.splits.train) / self.training.batch_size)
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
        """Nothing is left; or a budget is met and the score has fallen well below the best;
        or, past ``path.points``, the last point is no longer within the tolerance of the best
        (or keeps a single feature, or the budget), unless it still keeps more than half of
        the dense model's features: a dense model that fits its few training rows exactly has
        a training loss near zero, the gates' penalty unit, and the planned points may not
        reach a penalty that removes much (on 20,000 columns and 1200 training rows
        ``fedsdg_fs``'s twelfth point kept 14,516, all scoring near the dense model's 45%,
        while 9 columns reach 95%).

        Without a budget the planned points go on through dips: the score often recovers once
        the noise features are gone.
        """
        last, budget = points[-1], self.path.max_features
        if last.kept == 0:
            return True
        best = max(p.val_metric for p in points)
        slack = tolerance(self.path.tolerance, experiment, best, self.path.standard_errors)
        if last.point >= self.path.points:  # past the planned points: on while still good
            if 2 * last.kept > points[0].kept:
                return False
            return not is_within(last.val_metric, best, slack) or last.kept <= (budget or 1)
        if budget is None or last.kept > budget:
            return False
        return not is_within(last.val_metric, best, 3 * slack)

    def stop_early(self, epoch: int, result: RunResult) -> bool:
        """Warm-up and refit stop on validation; a path point always runs to its end.

        The warm-up counts epochs once the dense model has learned something (its best
        validation score above the majority class's,
        :func:`~vflfs.strategies.early_stopping.learned_level`) and keeps the
        ``training.patience_steps`` floor only until then: the path's points train at least
        ``path.steps_per_point`` steps each after it, and a warm-up with the floor throughout
        let the dense model overfit 2000 rows before the penalty started (the quick preset's
        precision fell from 0.98 to 0.83 for ``stg``), while one without it ended after 3 steps
        at the majority rate on a table of 113 training rows (wine)."""
        if not self.path.enabled:
            return super().stop_early(epoch, result)
        if self.patience is None:
            return False
        if self.stage == "warmup":
            return self.patience_over(epoch, result, self.patience, self.learned_above)
        return self.patience_over(epoch, result, self.patience)

    def reported_row(self, result: RunResult) -> dict:
        """In the warm-up, the first epoch at the best validation score: the dense point the
        path starts from (its selection, and its training loss as the penalty's unit)."""
        if self.path.enabled and self.stage == "warmup":
            return result.first_best
        return super().reported_row(result)

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
