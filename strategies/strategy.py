"""The abstract VFL strategy: a few hooks and a ``start`` that runs the loop.

Modelled on ``flwr.serverapp.strategy.Strategy``: a strategy drives the parties through a
:class:`~vflfs.federation.Federation` (it never builds Flower messages) and keeps the server's
model and labels to itself.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Callable

from omegaconf import DictConfig

from vflfs.federation import Federation
from vflfs.runtime.settings import AUTO, RunSettings
from vflfs.server_app.experiment import Experiment

from .result import RunResult

log = logging.getLogger("vflfs")

EpochCallback = Callable[[dict], None]


class Strategy(ABC):
    """Abstract base class of server-side VFL strategies."""

    name: str = "strategy"

    def __init__(self, cfg: DictConfig, run_settings: RunSettings | None = None) -> None:
        """``run_settings``: ``cfg``'s run-wide sections as the run typed them (its
        experiment's), else typed here."""
        self.cfg = cfg
        self.run_settings = run_settings or RunSettings.from_cfg(cfg)
        self.training = self.run_settings.training  # the ``training`` section, typed

    @abstractmethod
    def configure(self, federation: Federation, experiment: Experiment) -> RunResult:
        """Set the parties up (the ``setup`` phase); returns the result to fill."""

    @abstractmethod
    def fit(
        self,
        federation: Federation,
        experiment: Experiment,
        result: RunResult,
        on_epoch: EpochCallback | None,
    ) -> None:
        """Train, appending one history row per epoch to ``result``."""

    def record_batch_size(self, experiment: Experiment, result: RunResult) -> None:
        """Record the batch size the run trains with (``auto`` resolved on its rows)."""
        size = experiment.training.batch_size
        result.extra["batch_size"] = size
        if self.run_settings.training.batch_size == AUTO:
            rows = len(experiment.splits.train)
            log.info(
                "batch size auto: %d rows, %d steps an epoch of %d training rows",
                size,
                math.ceil(rows / size),
                rows,
            )

    def finish(self, federation: Federation, experiment: Experiment, result: RunResult) -> None:
        """After training (the ``summary`` phase): collect what the report shows. None here."""
        return None

    def summary(self, result: RunResult) -> None:
        """Log the outcome."""
        best = result.best
        if best:
            log.info(
                "%s: best epoch %d, test %s %.4f",
                self.name,
                best["epoch"],
                result.metric,
                best["test_metric"],
            )

    def start(
        self,
        federation: Federation,
        experiment: Experiment,
        on_epoch: EpochCallback | None = None,
    ) -> RunResult:
        """Run the strategy to the end and return its result."""
        with federation.traffic.in_phase("setup"):
            result = self.configure(federation, experiment)
        self.record_batch_size(experiment, result)
        self.fit(federation, experiment, result, on_epoch)
        with federation.traffic.in_phase("summary"):
            self.finish(federation, experiment, result)
        self.summary(result)
        return result
