"""The real feature-selection benchmarks, one ``<name>.npz`` file each in the data directory.

Files hold ``X`` (float32), ``y`` (int64, 0..K-1) and, where the source has an official split,
``train_idx``/``test_idx``. See the README next to the files for sources and sizes.
"""

from __future__ import annotations

from pathlib import Path

from vflfs.datasets.dataset import Dataset, make_dataset
from vflfs.datasets.npz_files import read_npz
from vflfs.datasets.paths import require_data_dir
from vflfs.datasets.registry import Loader, register_dataset

BENCHMARKS = (
    "madelon",
    "arcene",
    "basehock",
    "pcmac",
    "relathe",
    "coil20",
    "isolet",
    "phishing",
    "sylva",
)
IMAGE_SHAPES: dict[str, tuple[int, int]] = {"coil20": (32, 32)}


def load_benchmark(name: str, data_dir: Path | None) -> Dataset:
    """Read ``<data_dir>/<name>.npz`` into a classification :class:`Dataset`."""
    root = require_data_dir(data_dir, f"dataset '{name}'")
    arrays = read_npz(root / f"{name}.npz")
    return make_dataset(
        name,
        arrays["X"],
        arrays["y"],
        "classification",
        train_idx=arrays.get("train_idx"),
        test_idx=arrays.get("test_idx"),
        image_shape=IMAGE_SHAPES.get(name),
    )


def _benchmark_loader(name: str) -> Loader:
    def load(data_dir: Path | None) -> Dataset:
        return load_benchmark(name, data_dir)

    load.__name__ = f"load_{name}"
    load.__doc__ = f"Load the '{name}' benchmark from <data_dir>/{name}.npz."
    return load


for _name in BENCHMARKS:
    register_dataset(_name)(_benchmark_loader(_name))
