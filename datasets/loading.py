"""``load_dataset``: the entry point, with a small process-level cache.

Parties reload the same dataset for every message, so loaded datasets are cached per process,
keyed by name, resolved data directory and sorted parameters (plus the size and modification
time of a user file named by a ``path`` parameter, so an edited file is reloaded). Cached
datasets have read-only arrays and cannot be mutated by one caller behind another's back.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

from vflfs.datasets.dataset import Dataset
from vflfs.datasets.paths import resolve_data_dir, resolve_user_path
from vflfs.datasets.registry import call_loader, get_loader

CACHE_SIZE = 8
_cache: OrderedDict[Hashable, Dataset] = OrderedDict()
_lock = threading.Lock()


def load_dataset(
    name: str, data_dir: str | os.PathLike[str] | None = None, **params: Any
) -> Dataset:
    """Load the registered dataset ``name`` with loader parameters ``params``.

    ``data_dir`` is the config value ``dataset.data_dir``; when empty, the environment variable
    ``VFLFS_DATA_DIR`` is used. Raises DataError for unknown names, bad parameters, missing
    files and invalid data.
    """
    get_loader(name)
    root = resolve_data_dir(data_dir)
    key = _cache_key(name, root, params)
    if key is not None:
        with _lock:
            if key in _cache:
                _cache.move_to_end(key)
                return _cache[key]
    dataset = call_loader(name, root, params)
    if key is not None:
        with _lock:
            _cache[key] = dataset
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return dataset


def clear_dataset_cache() -> None:
    """Forget every cached dataset."""
    with _lock:
        _cache.clear()


def _freeze(value: Any) -> Hashable:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    hash(value)
    return value


def _file_stamp(root: Path | None, params: Mapping[str, Any]) -> tuple[int, int] | None:
    if not params.get("path"):
        return None
    try:
        stat = resolve_user_path(params["path"], root).stat()
    except (OSError, ValueError):
        return None
    return stat.st_size, stat.st_mtime_ns


def _cache_key(name: str, root: Path | None, params: Mapping[str, Any]) -> Hashable | None:
    try:
        frozen = _freeze(dict(params))
    except TypeError:
        return None
    return name, str(root), frozen, _file_stamp(root, params)
