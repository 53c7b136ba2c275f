"""Datasets for vflfs: loading, validation, and cutting data into parties.

Loading goes through a registry (``load_dataset(name, data_dir, **params)``); the data
directory comes from the config key ``dataset.data_dir`` or the env var ``VFLFS_DATA_DIR``; the
benchmarks fall back to the user cache folder that ``vflfs data fetch`` (:mod:`.fetch`) fills.
Column splits say which columns each party holds, sample splits which rows are train /
validation / test; a party's view adds spurious noise columns and scales on training rows.
Every bad input raises :class:`DataError` (a ``ValueError``) naming the problem and the fix.
"""

from vflfs.datasets import benchmarks as _benchmarks  # noqa: F401  (registers loaders)
from vflfs.datasets import synthetic as _synthetic  # noqa: F401
from vflfs.datasets import teacher as _teacher  # noqa: F401
from vflfs.datasets import user_files as _user_files  # noqa: F401
from vflfs.datasets.dataset import TASKS, Dataset, make_dataset
from vflfs.datasets.errors import DataError
from vflfs.datasets.loading import clear_dataset_cache, load_dataset
from vflfs.datasets.noise import UNEVEN_RATIOS, add_spurious_features, noise_ratios
from vflfs.datasets.party_view import PartyData, build_party_data
from vflfs.datasets.paths import DATA_DIR_ENV, default_data_dir, resolve_data_dir
from vflfs.datasets.registry import REGISTRY, dataset_names, register_dataset
from vflfs.datasets.sample_splits import SampleSplits, kfold_splits, split_samples
from vflfs.datasets.scaling import center, minmax_scale
from vflfs.datasets.splits import SPLIT_KINDS, split_columns
from vflfs.datasets.validation import validate

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
