"""Server-side VFL strategies, by the name used in ``strategy=<name>``."""

from __future__ import annotations

from omegaconf import DictConfig

from vflfs.runtime.config import ConfigError

from .result import PartyReport, RunResult
from .strategy import Strategy
from .vfl import VFL

STRATEGIES: dict[str, type[Strategy]] = {cls.name: cls for cls in (VFL,)}


def make_strategy(cfg: DictConfig) -> Strategy:
    """The strategy named by ``cfg.strategy.name``."""
    name = str(cfg.strategy.name)
    if name not in STRATEGIES:
        raise ConfigError(
            f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)} (strategy=<name>)"
        )
    return STRATEGIES[name](cfg)


__all__ = ["STRATEGIES", "PartyReport", "RunResult", "Strategy", "VFL", "make_strategy"]
