"""Gini filter (spec section 6): keep the best fraction of features by secure Gini, then train.

FedSDG-FS's "FedSDG-FS-gini" filter baseline (Li et al. 2023, "FedSDG-FS: Efficient and Secure
Feature Selection for Vertical Federated Learning", INFOCOM, Sec. VI and Fig. 5, where it is
compared with SFFS and random selection): every party's features are scored by the secure Gini
protocol (:func:`vflfs.strategies.gini.secure_gini`), the server ranks all of them (smaller G =
more important) and keeps the best ``keep_fraction`` overall; each party removes the rest for
good (``train.keep``) and standard VFL trains on what is left. :class:`SelectThenTrain` is the
shared skeleton of the filter baselines (Gini, F-statistic, random).
"""

from __future__ import annotations

import math

import numpy as np

from vflfs.federation import Federation
from vflfs.protocol import KEEP, KeepRequest
from vflfs.server_app.experiment import Experiment

from .checkpoint_hooks import resuming
from .filter_choice import CountChoice
from .gini import global_ranks, keep_best, scoring_phase, secure_gini
from .registry import register
from .result import RunResult
from .strategy import EpochCallback, Strategy, log
from .vfl import VFL


class SelectThenTrain(CountChoice, VFL):
    """Score every feature once, keep the best ones overall, then standard VFL: as many as
    validation chooses (:mod:`vflfs.strategies.filter_choice`), or ``keep_fraction``."""

    name = Strategy.name  # a skeleton: not a strategy of its own
    phase = "selection"  # traffic phase of the scoring and the removal
    lower_is_better = True
    patience: int | None = None
    ranks: list[np.ndarray] = []  # each party's features' places in the overall ranking

    def party_spec(self, experiment: Experiment, m: int) -> dict:
        spec = super().party_spec(experiment, m)
        keep = self.keep_spec(m)
        if keep is not None:
            spec["keep"] = keep
        return spec

    def fit(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
    ) -> None:
        if self.cfg.strategy.get("keep_fraction") is not None:
            super().fit(federation, experiment, result, on_epoch)
            return
        if not resuming(self):  # a resumed run has its ranking back
            with scoring_phase(federation, self.phase):
                scores = self.scores(federation, experiment, result)
            result.extra["filter"] = {
                "method": self.name,
                "scores": [[_finite(v) for v in s] for s in scores],
            }
            self.ranks = global_ranks(scores, self.lower_is_better)
        self.choose_count(federation, experiment, result, on_epoch, self.ranks)

    def stop_early(self, epoch: int, result: RunResult) -> bool:
        if self.patience is None:
            return super().stop_early(epoch, result)
        return self.patience_over(epoch, result, self.patience)

    def scores(
        self, federation: Federation, experiment: Experiment, result: RunResult
    ) -> list[np.ndarray]:
        """One score per feature of each party's full set (``result.parties``: their sizes)."""
        raise NotImplementedError

    def before_training(
        self, federation: Federation, experiment: Experiment, result: RunResult
    ) -> None:
        """Score, keep the best ``keep_fraction`` of all features, remove the rest for good."""
        fraction = float(self.cfg.strategy.keep_fraction)
        with scoring_phase(federation, self.phase):
            scores = self.scores(federation, experiment, result)
            kept = keep_best(scores, fraction, self.lower_is_better)
            federation.send(KEEP, {m: KeepRequest(features=k) for m, k in enumerate(kept)})
        for m, k in enumerate(kept):
            result.parties[m].selected = k.tolist()
        result.extra["filter"] = {
            "method": self.name,
            "keep_fraction": fraction,
            "scores": [[_finite(v) for v in s] for s in scores],
            "kept": [k.tolist() for k in kept],
        }
        log.info(
            "%s: kept %d of %d features",
            self.name,
            sum(len(k) for k in kept),
            sum(len(s) for s in scores),
        )


def _finite(value: float) -> float | None:
    """JSON-safe: infinite or undefined scores become None."""
    value = float(value)
    return value if math.isfinite(value) else None


@register
class GiniFilter(SelectThenTrain):
    """Secure Gini (FedSDG-FS Algorithm 1), keep the best ``keep_fraction``, then VFL."""

    name = "gini_filter"
    phase = "gini"

    def scores(
        self, federation: Federation, experiment: Experiment, result: RunResult
    ) -> list[np.ndarray]:
        return secure_gini(federation, experiment, self.cfg.strategy.get("gini"))
