"""The dataset registry: name -> loader function, filled by the ``register_dataset`` decorator.

A loader is called as ``loader(data_dir, **params)`` where ``data_dir`` is the resolved data
directory (or None) and ``params`` are keyword-only parameters with defaults (a parameter
without a default is required).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from importlib import import_module
from pathlib import Path
from typing import Any

from vflfs.datasets.dataset import Dataset
from vflfs.datasets.errors import DataError

Loader = Callable[..., Dataset]
REGISTRY: dict[str, Loader] = {}
BUILTIN = ("benchmarks", "synthetic", "teacher", "user_files")  # modules whose loaders register


def _register_builtin() -> None:
    """Import the modules of vflfs's own loaders (each registers its loaders once)."""
    for module in BUILTIN:
        import_module(f"vflfs.datasets.{module}")


def register_dataset(name: str) -> Callable[[Loader], Loader]:
    """Decorator that registers a loader under ``name``."""

    def decorate(loader: Loader) -> Loader:
        if name in REGISTRY:
            raise DataError(f"dataset name {name!r} is registered twice; fix: pick a new name")
        REGISTRY[name] = loader
        return loader

    return decorate


def dataset_names() -> list[str]:
    """Registered dataset names, sorted."""
    _register_builtin()
    return sorted(REGISTRY)


def get_loader(name: str) -> Loader:
    """Return the loader of ``name`` or raise a DataError listing the available names."""
    _register_builtin()
    if not isinstance(name, str) or name not in REGISTRY:
        raise DataError(
            f"unknown dataset {name!r}; fix: use one of {dataset_names()} (config key dataset.name)"
        )
    return REGISTRY[name]


def check_params(name: str, loader: Loader, params: Mapping[str, Any]) -> None:
    """Raise a DataError for parameters the loader does not take or required ones missing."""
    accepted = {
        key: p
        for key, p in inspect.signature(loader).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise DataError(
            f"dataset {name!r} has no parameter(s) {unknown}; fix: use only "
            f"{sorted(accepted) or 'no parameters'}"
        )
    missing = [k for k, p in accepted.items() if p.default is inspect.Parameter.empty]
    missing = [k for k in missing if k not in params]
    if missing:
        raise DataError(f"dataset {name!r} needs the parameter(s) {missing}; fix: set them")


def call_loader(name: str, data_dir: Path | None, params: Mapping[str, Any]) -> Dataset:
    """Check ``params`` against the loader of ``name`` and run it."""
    loader = get_loader(name)
    check_params(name, loader, params)
    return loader(data_dir, **params)
