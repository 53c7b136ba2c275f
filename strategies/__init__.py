"""Server-side VFL strategies, by the name used in ``strategy=<name>``."""

from __future__ import annotations

from omegaconf import DictConfig

from vflfs.runtime.settings import RunSettings

from .registry import STRATEGIES, load_built_in, register, strategy_class
from .result import PartyReport, RunResult
from .strategy import Strategy
from .vfl import VFL

load_built_in()


def make_strategy(cfg: DictConfig, run_settings: RunSettings | None = None) -> Strategy:
    """The strategy named by ``cfg.strategy.name``, reading the run-wide ``run_settings``
    (the run's experiment's; None: typed from ``cfg``)."""
    return strategy_class(str(cfg.strategy.name))(cfg, run_settings)


__all__ = [
    "STRATEGIES",
    "PartyReport",
    "RunResult",
    "Strategy",
    "VFL",
    "make_strategy",
    "register",
    "strategy_class",
]
