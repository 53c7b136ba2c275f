"""A stalled start: training that has not left the uniform prediction.

Some initialisations leave a split model predicting the class prior (every ReLU of a layer
dead, or inputs far from the first layer's range): the training loss stays at the prior's
entropy and validation at the majority rate. :meth:`vflfs.strategies.vfl.VFL.start_reliably`
watches the first ``STALL_EPOCHS`` epochs with :func:`stalled` and restarts from a new
initialisation at ``RESTART_LR`` times the learning rate, at most ``MAX_RESTARTS`` times.
"""

from __future__ import annotations

import numpy as np

from vflfs.server_app.experiment import Experiment

STALL_EPOCHS = 3  # epochs watched for a stalled start
MAX_RESTARTS = 2
RESTART_LR = 0.3  # learning-rate factor of each restart
RESTART_SEED = 7919  # initialisation seed offset of each restart


def stalled(experiment: Experiment, rows: list[dict]) -> bool:
    """Classification only: every epoch's training loss within 2% of the class prior's
    entropy (what predicting the prior costs) and its validation score at most the majority
    rate of the training labels."""
    if experiment.task.kind != "classification" or not rows:
        return False
    y = experiment.y[experiment.splits.train]
    prior = np.bincount(y, minlength=experiment.task.n_classes) / max(len(y), 1)
    entropy = float(-(prior[prior > 0] * np.log(prior[prior > 0])).sum())
    majority = float(prior.max())
    return all(
        r["train_loss"] >= 0.98 * entropy and r["val_metric"] <= majority + 0.005 for r in rows
    )
