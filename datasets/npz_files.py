"""Reading ``.npz`` files safely (no pickle) into a dict of arrays; writing them atomically."""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
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


def write_npz_atomic(path: Path, arrays: Mapping[str, np.ndarray]) -> Path:
    """Write ``arrays`` to a compressed ``.npz`` at ``path`` in one step.

    The file is written under a temporary name in the same folder and renamed over ``path`` only
    once complete, so a failure (full disk, interruption) leaves no half-written ``path`` and an
    earlier file there untouched.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".npz.part")
    part = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez_compressed(handle, **dict(arrays))
            handle.flush()
            os.fsync(handle.fileno())
        part.chmod(0o644)
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return path
