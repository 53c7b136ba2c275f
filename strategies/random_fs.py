"""Random selection (spec section 6): keep a seeded random fraction of features, then train.

The "random FS" baseline of Li et al. 2023, "FedSDG-FS: Efficient and Secure Feature Selection
for Vertical Federated Learning", INFOCOM (Sec. VI, Fig. 5). The server draws the subset from
the run's seed (``seed`` + ``strategy.seed``) over all parties' features; no party data is used
and no label statistic travels.
"""

from __future__ import annotations

import numpy as np

from vflfs.federation import Federation
from vflfs.server_app.experiment import Experiment

from .gini_filter import SelectThenTrain
from .registry import register
from .result import RunResult


@register
class RandomFS(SelectThenTrain):
    """Keep a uniformly random ``keep_fraction`` of all features (seeded), then VFL."""

    name = "random_fs"
    phase = "selection"

    def scores(
        self, federation: Federation, experiment: Experiment, result: RunResult
    ) -> list[np.ndarray]:
        """Uniform random scores, the smallest kept: a uniformly random subset."""
        rng = np.random.default_rng([experiment.seed, int(self.cfg.strategy.get("seed", 0))])
        return [rng.random(p.n_features) for p in result.parties]
