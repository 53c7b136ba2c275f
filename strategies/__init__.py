"""Server-side VFL strategies, by the name used in ``strategy=<name>``."""

from __future__ import annotations

from omegaconf import DictConfig

from .registry import STRATEGIES, load_built_in, register, strategy_class
from .result import PartyReport, RunResult
from .strategy import Strategy
from .vfl import VFL

load_built_in()


def make_strategy(cfg: DictConfig) -> Strategy:
    """The strategy named by ``cfg.strategy.name``."""
    return strategy_class(str(cfg.strategy.name))(cfg)


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
