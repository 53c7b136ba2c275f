"""Hydra sweep support: progress across jobs, and skipping jobs that already completed.

A sweep's jobs land in ``<hydra.sweep.dir>/<overrides>`` (e.g. ``dataset=madelon,seed=1``), so
re-running the same sweep command with the same ``hydra.sweep.dir`` finds every finished job's
``results.json`` and skips it: a crash mid-sweep loses nothing and repeats no work.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger("vflfs")


def count_jobs(overrides: list[str]) -> int:
    """Jobs of a basic-sweeper sweep: the product of the swept values' counts."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    return math.prod(len(list(o.sweep_string_iterator())) for o in parsed if o.is_sweep_override())


class SweepProgress(Callback):
    """Logs ``job i/N`` with the job's overrides, and the sweep's elapsed time.

    Parallel launchers (``hydra/launcher=joblib``, ``submitit_slurm``) run each job's callbacks
    in a copy of this object in another process, so a job's number is read from its config
    (``hydra.job.num``) and the elapsed time from the wall clock, never counted here.
    """

    def __init__(self) -> None:
        self.total = 0
        self.start = time.time()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.total = count_jobs(list(config.hydra.overrides.task))
        self.start = time.time()
        log.info("sweep: %d jobs -> %s", self.total, config.hydra.sweep.dir)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.total:
            overrides = " ".join(config.hydra.overrides.task)
            log.info("sweep: job %d/%d  %s", self._number(config), self.total, overrides)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if self.total:
            elapsed = time.time() - self.start
            number = self._number(config)
            log.info("sweep: job %d/%d done, %.0f s elapsed", number, self.total, elapsed)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.total:
            elapsed = time.time() - self.start
            log.info("sweep: %d jobs done in %.0f s", self.total, elapsed)

    @staticmethod
    def _number(config: DictConfig) -> int:
        return int(config.hydra.job.num) + 1
