"""Server-side VFL strategies, by the name used in ``strategy=<name>``."""

from __future__ import annotations

import importlib
import pkgutil

from omegaconf import DictConfig

from vflfs.runtime.config import ConfigError

from .result import PartyReport, RunResult
from .strategy import Strategy
from .vfl import VFL


def _discover() -> dict[str, type[Strategy]]:
    """Every Strategy subclass defined in this package's modules, by its ``name``."""
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    found: dict[str, type[Strategy]] = {}
    todo = [Strategy]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith(__name__) and sub.name != Strategy.name:
                found[sub.name] = sub
    return found


STRATEGIES: dict[str, type[Strategy]] = _discover()


def make_strategy(cfg: DictConfig) -> Strategy:
    """The strategy named by ``cfg.strategy.name``."""
    name = str(cfg.strategy.name)
    if name not in STRATEGIES:
        raise ConfigError(
            f"unknown strategy {name!r}; choose one of {sorted(STRATEGIES)} (strategy=<name>)"
        )
    return STRATEGIES[name](cfg)


__all__ = ["STRATEGIES", "PartyReport", "RunResult", "Strategy", "VFL", "make_strategy"]
