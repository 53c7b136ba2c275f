"""The strategies by the name used in ``strategy=<name>``: registered explicitly.

Each strategy class registers itself with :func:`register` where it is defined; the package
imports its built-in strategy modules by name (:data:`BUILT_IN`). A name outside them is
looked up in the module of the same name, ``vflfs.strategies.<name>`` (so a new strategy in
``strategies/<name>.py`` needs no line elsewhere).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TypeVar

from vflfs.runtime.config import CONF_DIR, ConfigError

from .strategy import Strategy

S = TypeVar("S", bound=type[Strategy])

STRATEGIES: dict[str, type[Strategy]] = {}
"""Every registered strategy class, by its ``name``."""

BUILT_IN = (
    "vfl",
    "stg",
    "fedsdg_fs",
    "gini_filter",
    "fstat_filter",
    "random_fs",
    "group_lasso",
    "less_vfl",
    "local_lasso",
)
"""The modules of the package's own strategies (each registers the strategy of its name)."""


def register(cls: S) -> S:
    """Class decorator: make ``cls`` the strategy of ``strategy=<cls.name>``."""
    name = cls.name
    if not name or name == Strategy.name:
        raise ValueError(f"{cls.__qualname__} needs a name of its own (class attribute `name`)")
    known = STRATEGIES.get(name)
    if known is not None and known is not cls:
        raise ValueError(
            f"strategy name {name!r} is taken by {known.__module__}.{known.__qualname__}; "
            f"give {cls.__module__}.{cls.__qualname__} another name"
        )
    STRATEGIES[name] = cls
    return cls


def load_built_in() -> None:
    """Import (and so register) the package's own strategies."""
    for module in BUILT_IN:
        importlib.import_module(f"{__package__}.{module}")


def strategy_class(name: str) -> type[Strategy]:
    """The strategy registered as ``name``, importing ``vflfs.strategies.<name>`` if no
    strategy of that name is registered yet."""
    if name not in STRATEGIES and name.isidentifier():
        module = f"{__package__}.{name}"
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)
    if name not in STRATEGIES:
        known = set(STRATEGIES) | {p.stem for p in (CONF_DIR / "strategy").glob("*.yaml")}
        raise ConfigError(
            f"unknown strategy {name!r}; choose one of {sorted(known)} (strategy=<name>)"
        )
    return STRATEGIES[name]
