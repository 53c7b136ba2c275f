"""Early stopping on validation, and when a model has learned anything.

:class:`EarlyStopping` (a part of :class:`vflfs.strategies.vfl.VFL`) ends a stage once
``training.patience`` epochs, and at least ``training.patience_steps`` optimiser steps, have
passed without a better validation score; strategies with stages of their own (the path's
warm-up, LESS-VFL's pre-training, a filter's counts) call :meth:`EarlyStopping.patience_over`
with their own patience. :func:`learned_level` is the validation accuracy a model must exceed
to have learned anything.
"""

from __future__ import annotations

import math

from vflfs.ml.metrics import majority_margin
from vflfs.runtime.settings import TrainingSettings
from vflfs.server_app.experiment import Experiment

from .result import RunResult


class EarlyStopping:
    """Patience on the validation score, floored by optimiser steps."""

    training: TrainingSettings
    epoch_steps = 1  # optimiser steps per epoch (the training loop sets it)
    # validation accuracy at most this: no better than the majority class (learned_level;
    # the training loop sets it)
    majority_level: float | None = None

    def stop_early(self, epoch: int, result: RunResult) -> bool:
        """``training.patience`` epochs passed without a better validation score."""
        patience = self.training.patience
        return patience is not None and self.patience_over(epoch, result, patience)

    def patience_over(
        self, epoch: int, result: RunResult, patience: int, learned_above: float | None = None
    ) -> bool:
        """``patience`` epochs, and at least ``training.patience_steps`` optimiser steps,
        passed without a better validation score. On a few hundred rows an epoch is one or two
        steps: two epochs cannot tell a model that stopped learning from one not yet started.
        While the best score is no better than the majority class's (``majority_level``), a
        lower validation loss counts as progress too: on imbalanced classes a model predicts
        the majority class for epochs while its loss falls, then leaves it.

        With ``learned_above`` (:func:`learned_level`), for a stage that should end soon after
        the model has learned something (the path's warm-up, LESS-VFL's pre-training): until
        its best validation score is above that, the stage waits the steps floor and
        ``training.patience`` epochs, as a dense run would, then ``patience`` epochs alone. A
        warm-up that ends before the model has learned starts the path from an untrained
        model: on a label that only an interaction of two columns at two parties predicts, the
        gated model's validation score stayed at the majority rate for 13 epochs while its
        loss fell (docs/selection.md, the xor set)."""
        best = result.first_best
        last = best["epoch"]
        if self.majority_level is not None and best["val_metric"] <= self.majority_level:
            last = max(last, lowest_val_loss(result) or 0)
        waited = epoch - last
        if learned_above is not None and best["val_metric"] > learned_above:
            return waited >= patience
        steps = self.training.patience_steps
        floor = max(patience, math.ceil(steps / self.epoch_steps))
        if learned_above is not None:  # not learned yet: wait as long as a dense run would
            floor = max(floor, self.training.patience or 0)
        return waited >= floor


def learned_level(experiment: Experiment) -> float | None:
    """The validation accuracy a model must exceed to have learned anything: the majority
    class's accuracy on the validation rows plus one standard error of it
    (:func:`~vflfs.ml.metrics.majority_margin`, as the run's outcome on the test rows). None
    for regression."""
    val = experiment.splits.val
    if experiment.task.kind != "classification" or not len(val):
        return None
    rate = experiment.majority_rate(val)
    return rate + majority_margin(rate, len(val))


def lowest_val_loss(result: RunResult) -> int | None:
    """The epoch of the lowest validation loss in the result's window (earliest on ties)."""
    rows = [
        r
        for r in result.history
        if r["epoch"] >= result.best_from
        and (result.best_to is None or r["epoch"] < result.best_to)
    ]
    return min(rows, key=lambda r: (r["val_loss"], r["epoch"]))["epoch"] if rows else None
