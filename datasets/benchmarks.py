"""The real feature-selection benchmarks, one ``<name>.npz`` file each in the data directory.

Files hold ``X`` (float32), ``y`` (int64, 0..K-1) and, where the source has an official split,
``train_idx``/``test_idx``. ``vflfs data fetch NAME`` downloads and converts them
(:mod:`vflfs.datasets.fetch`); docs/datasets.md lists the sources and licences.
"""

from __future__ import annotations

from pathlib import Path

from vflfs.datasets.dataset import Dataset, make_dataset
from vflfs.datasets.errors import DataError
from vflfs.datasets.npz_files import read_npz
from vflfs.datasets.paths import CONFIG_KEY, DATA_DIR_ENV, benchmark_data_dir
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
    """Read ``<data_dir>/<name>.npz`` (the default data folder when ``data_dir`` is None) into a
    classification :class:`Dataset`."""
    path = benchmark_data_dir(data_dir) / f"{name}.npz"
    if not path.is_file():
        command = f"vflfs data fetch {name}" + (
            "" if data_dir is None else f" --data-dir {data_dir}"
        )
        raise DataError(
            f"dataset '{name}' is not downloaded: {path} does not exist; fix: run "
            f"`{command}` (it writes {path}), or set the config key "
            f"{CONFIG_KEY} or the environment variable {DATA_DIR_ENV} to the folder that "
            f"holds {name}.npz"
        )
    arrays = read_npz(path)
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
