"""A stalled start: training that has not left the uniform prediction.

Some initialisations leave a split model predicting the class prior (every ReLU of a layer
dead, or inputs far from the first layer's range): the training loss stays at the prior's
entropy and validation at the majority rate. :meth:`StallRecovery.start_reliably` (a part of
:class:`vflfs.strategies.vfl.VFL`) watches the first ``STALL_EPOCHS`` epochs with
:func:`stalled` and restarts from a new initialisation at ``RESTART_LR`` times the learning
rate, at most ``MAX_RESTARTS`` times; a start still stalled at the smallest rate restarts once
more at the configured rate (:func:`lr_scale`), unwatched.

The smaller rate is for a start whose first layer sits far from its inputs (uncentred columns:
``benchmarks.stall``, centring switched off, restarted 18 of 30 runs, none more than twice,
none ended at chance). An interaction that no column shows alone (the label the XOR of two
columns at two parties) also starts at the uniform prediction for a few epochs, and a smaller
rate only holds it there: the last restart gives it the configured rate back.
"""

from __future__ import annotations

import numpy as np

from vflfs.federation import Federation
from vflfs.server_app.experiment import Experiment

from .checkpoint_hooks import resumed_first, resuming
from .interactive import make_layer
from .result import RunResult
from .strategy import EpochCallback, log

STALL_EPOCHS = 3  # epochs watched for a stalled start
MAX_RESTARTS = 2
RESTART_LR = 0.3  # learning-rate factor of each restart
RESTART_SEED = 7919  # initialisation seed offset of each restart
LEARNING_MARGIN = 0.0025  # a watched epoch this far (relative) below the prior's entropy learns


def stalled(experiment: Experiment, rows: list[dict]) -> bool:
    """Classification only: every epoch's training loss within 2% of the class prior's
    entropy (what predicting the prior costs) and its validation score at most the majority
    rate of the training labels, and no epoch's loss below that entropy by ``LEARNING_MARGIN``
    of it.

    A dead network learns the prior and no more: its epochs' mean loss cannot fall below the
    prior's entropy. A slow start (a small learning rate, several local steps per round-trip)
    also predicts the majority class for a few epochs, but its loss goes below the entropy
    (MADELON, lr 0.001, K = 13: 0.699, 0.693, 0.689 against 0.693): a restart at a smaller
    learning rate would only slow it further."""
    if experiment.task.kind != "classification" or not rows:
        return False
    y = experiment.y[experiment.splits.train]
    prior = np.bincount(y, minlength=experiment.task.n_classes) / max(len(y), 1)
    entropy = float(-(prior[prior > 0] * np.log(prior[prior > 0])).sum())
    majority = float(prior.max())
    near_prior = all(
        r["train_loss"] >= 0.98 * entropy and r["val_metric"] <= majority + 0.005 for r in rows
    )
    return near_prior and min(r["train_loss"] for r in rows) > (1 - LEARNING_MARGIN) * entropy


def lr_scale(restarts: int) -> float:
    """The learning-rate factor after ``restarts`` restarts: ``RESTART_LR`` per restart up to
    ``MAX_RESTARTS``, then 1 (the last restart, after the smaller rates stalled too)."""
    return RESTART_LR**restarts if restarts <= MAX_RESTARTS else 1.0


def restarted(spec: dict, restarts: int) -> dict:
    """A party's setup instructions after ``restarts`` restarts: a new initialisation seed,
    and every learning rate it trains with (its weights' and, where the gates have their own
    optimiser, the gates') times ``RESTART_LR ** restarts``."""
    if restarts:
        factor = lr_scale(restarts)
        spec["seed"] += RESTART_SEED * restarts
        spec["optimizer"]["lr"] *= factor
        for gate in (spec.get("gates") or {}).values():
            if "lr" in gate:
                gate["lr"] *= factor
    return spec


class StallRecovery:
    """The epochs of :class:`vflfs.strategies.vfl.VFL` with a stalled start detected and
    restarted: the first epochs watched, the parties and the server rebuilt on a stall."""

    restarts = 0  # recoveries from a stalled start (new initialisation, smaller learning rate)
    stall_watch: tuple[int, int] | None = None  # (first, last) epoch watched for a stall
    stall_found = False

    def start_reliably(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
        epochs: int,
        first: int = 0,
    ) -> None:
        """Epochs ``first`` .. ``epochs`` - 1, with the first ones watched for a stalled start.

        While the training loss of the first ``STALL_EPOCHS`` epochs stays at the uniform
        prediction's (the class prior's entropy) and validation at the majority rate, the
        parties and the server restart from a new initialisation with a smaller learning rate
        (at most ``MAX_RESTARTS`` times, then once at the configured rate; each is logged and
        recorded). A window that would end at the last epoch is not watched: a restart there
        would leave nothing to train. The check rides on the epochs' own evaluation: a run
        that does not stall sends no extra message.
        """
        first = resumed_first(self) if resuming(self) else first
        while True:
            # watched only where a restart would leave epochs to train
            last = first + STALL_EPOCHS - 1
            self.stall_watch = (first, last) if last < epochs - 1 else None
            self.stall_found = False
            self.run_epochs(federation, experiment, result, on_epoch, first, epochs)
            self.stall_watch = None
            if not self.stall_found:
                return
            first = len(result.history)
            self.restarts += 1
            log.warning(
                "training stalled at the uniform prediction (loss %.4f) in epochs %d-%d: "
                "restarting from a new initialisation at %.3g x the learning rate",
                result.history[-1]["train_loss"],
                first - STALL_EPOCHS,
                first - 1,
                lr_scale(self.restarts),
            )
            result.extra.setdefault("restarts", []).append(
                {"epoch": first, "lr_scale": lr_scale(self.restarts)}
            )
            with federation.traffic.in_phase("setup"):
                self.setup_parties(federation, experiment)
            self.server = self.stage_server_model(experiment)
            self.layer = make_layer(self.secure, federation, experiment, self.server)
            result.best_from = first

    def watch_stall(self, experiment: Experiment, result: RunResult, epoch: int) -> bool:
        """At the watched epoch: True (stop, to restart) if the watched epochs stalled."""
        if self.stall_watch is None or epoch != self.stall_watch[1]:
            return False
        if not stalled(experiment, result.history[self.stall_watch[0] :]):
            return False
        if self.restarts > MAX_RESTARTS:
            return False
        self.stall_found = True
        return True
