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
    """Logs ``job i/N`` with the job's overrides, and the sweep's elapsed time."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self.start = time.perf_counter()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.total = count_jobs(list(config.hydra.overrides.task))
        self.start = time.perf_counter()
        log.info("sweep: %d jobs -> %s", self.total, config.hydra.sweep.dir)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.total:
            overrides = " ".join(config.hydra.overrides.task)
            log.info("sweep: job %d/%d  %s", self.done + 1, self.total, overrides)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if self.total:
            self.done += 1
            elapsed = time.perf_counter() - self.start
            log.info("sweep: %d/%d jobs done, %.0f s elapsed", self.done, self.total, elapsed)
