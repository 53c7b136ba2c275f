"""Datasets for vflfs: loading, validation, and cutting data into parties.

Loading goes through a registry (``load_dataset(name, data_dir, **params)``); the data
directory comes from the config key ``dataset.data_dir`` or the env var ``VFLFS_DATA_DIR``; the
benchmarks fall back to the user cache folder that ``vflfs data fetch`` (:mod:`.fetch`) fills.
Column splits say which columns each party holds, sample splits which rows are train /
validation / test; a party's view adds spurious noise columns and scales on training rows.
Every bad input raises :class:`DataError` (a ``ValueError``) naming the problem and the fix.
"""

from importlib import import_module
from typing import Any

# Each public name and its module, imported on first use: a party's process loads only what
# it reads (its data view), not every loader's libraries. Loaders register themselves when
# the registry is first asked for one (:func:`vflfs.datasets.registry.get_loader`).
_HOMES = {
    "DATA_DIR_ENV": "paths",
    "REGISTRY": "registry",
    "SPLIT_KINDS": "splits",
    "TASKS": "dataset",
    "UNEVEN_RATIOS": "noise",
    "DataError": "errors",
    "Dataset": "dataset",
    "PartyData": "party_view",
    "SampleSplits": "sample_splits",
    "add_spurious_features": "noise",
    "build_party_data": "party_view",
    "clear_dataset_cache": "loading",
    "dataset_names": "registry",
    "default_data_dir": "paths",
    "draw_rows": "sample_splits",
    "kfold_splits": "sample_splits",
    "load_dataset": "loading",
    "make_dataset": "dataset",
    "center": "scaling",
    "minmax_scale": "scaling",
    "noise_ratios": "noise",
    "register_dataset": "registry",
    "resolve_data_dir": "paths",
    "split_columns": "splits",
    "split_samples": "sample_splits",
    "validate": "validation",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)


__all__ = [
    "DATA_DIR_ENV",
    "REGISTRY",
    "SPLIT_KINDS",
    "TASKS",
    "UNEVEN_RATIOS",
    "DataError",
    "Dataset",
    "PartyData",
    "SampleSplits",
    "add_spurious_features",
    "build_party_data",
    "clear_dataset_cache",
    "dataset_names",
    "default_data_dir",
    "draw_rows",
    "kfold_splits",
    "load_dataset",
    "make_dataset",
    "center",
    "minmax_scale",
    "noise_ratios",
    "register_dataset",
    "resolve_data_dir",
    "split_columns",
    "split_samples",
    "validate",
]
