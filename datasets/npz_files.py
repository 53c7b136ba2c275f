"""Reading ``.npz`` files safely (no pickle) into a plain dict of arrays."""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vflfs.datasets.errors import DataError
from vflfs.datasets.paths import check_file


def read_npz(path: Path, required: Sequence[str] = ("X", "y")) -> dict[str, np.ndarray]:
    """Load every array of an ``.npz`` file with ``allow_pickle=False``.

    Raises DataError if the file is missing, unreadable, holds pickled objects, or lacks one of
    the ``required`` keys.
    """
    check_file(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise DataError(
            f"cannot read {path} as a numpy .npz file ({exc}); fix: save it with "
            "numpy.savez / savez_compressed using numeric arrays only (no Python objects)"
        ) from exc
    missing = [key for key in required if key not in arrays]
    if missing:
        raise DataError(
            f"{path} lacks the key(s) {missing} (it has {sorted(arrays)}); fix: save the "
            "features as X and the labels as y, e.g. numpy.savez(path, X=X, y=y)"
        )
    return arrays
