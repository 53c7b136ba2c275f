"""Where data files live: the configurable data directory and user file paths.

Library code never hard-codes a data location. The directory comes from the config key
``dataset.data_dir`` (passed in as ``data_dir``) or, failing that, the environment variable
``VFLFS_DATA_DIR``. The benchmarks, which ``vflfs data fetch`` downloads, fall back to the
user's cache folder (:func:`default_data_dir`) when neither is set.
"""

from __future__ import annotations

import os
from pathlib import Path

from vflfs.datasets.errors import DataError

DATA_DIR_ENV = "VFLFS_DATA_DIR"
CONFIG_KEY = "dataset.data_dir"
CACHE_ENV = "XDG_CACHE_HOME"


def default_data_dir() -> Path:
    """The benchmarks' folder when nothing is set: ``vflfs/datasets`` in the user's cache folder
    (``$XDG_CACHE_HOME``, else ``~/.cache``; ``%LOCALAPPDATA%`` on Windows)."""
    cache = os.environ.get(CACHE_ENV, "").strip()
    if not cache and os.name == "nt":
        cache = os.environ.get("LOCALAPPDATA", "").strip()
    root = Path(cache).expanduser() if cache else Path.home() / ".cache"
    return root / "vflfs" / "datasets"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """Return the data directory: the config value wins, else the env var, else None."""
    if data_dir is not None and str(data_dir).strip():
        return Path(data_dir).expanduser()
    from_env = os.environ.get(DATA_DIR_ENV, "").strip()
    if from_env:
        return Path(from_env).expanduser()
    return None


def benchmark_data_dir(data_dir: Path | None) -> Path:
    """The folder of the benchmark files: ``data_dir`` if set, else :func:`default_data_dir`."""
    return data_dir if data_dir is not None else default_data_dir()


def resolve_user_path(path: str | os.PathLike[str] | None, data_dir: Path | None) -> Path:
    """Resolve a user file path: absolute as given, relative to the data directory if one is set,
    else relative to the current directory."""
    if path is None or not str(path).strip():
        raise DataError(
            "no file path given; fix: pass the parameter path=<file> (absolute, or relative to "
            f"{CONFIG_KEY} / {DATA_DIR_ENV})"
        )
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or data_dir is None:
        return candidate
    return data_dir / candidate


def check_file(path: Path) -> Path:
    """Raise a DataError naming the path and both data-directory settings if ``path`` is no file."""
    if not path.is_file():
        raise DataError(
            f"data file not found: {path}; fix: set the config key {CONFIG_KEY} or the "
            f"environment variable {DATA_DIR_ENV} to the folder that holds {path.name} "
            "(or correct the file path)"
        )
    return path
