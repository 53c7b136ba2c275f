"""Per-party files for deployment: a party's features and the server's labels, keyed by sample ID.

In deployment every party reads its own file and the server reads only the labels file; they
align their rows by sample ID before training (:mod:`vflfs.datasets.alignment`).

* A **party file** holds one ID column and the party's feature columns: a ``.csv`` or
  ``.parquet`` table (every column but the ID column is a numeric feature), or an ``.npz`` with
  the arrays ``X`` (n, d) and ``<id column>`` (n,).
* The **labels file** holds the ID column, the label column and optionally a split column whose
  values are ``train`` / ``test`` (an official split): a table, or an ``.npz`` with one array per
  column. The server reads only those columns.

IDs are compared as text (``str`` of each value): write them the same way in every file (e.g.
``17`` in all files, not ``17`` in one and ``17.0`` or ``0017`` in another).

A party file is parsed once and cached as ``.npy`` files (features as float32, IDs as text) in a
cache folder, keyed by the file's absolute path, size and modification time; later loads
memory-map them. In Flower's deployment engine each message runs in a fresh ClientApp process,
so this makes a party's per-message data loading take milliseconds. The cache folder is the
SuperNode's ``cache-dir`` node config, else ``$VFLFS_CACHE_DIR``, else ``~/.cache/vflfs``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vflfs.datasets.dataset import Dataset, make_dataset
from vflfs.datasets.errors import DataError
from vflfs.datasets.label_classes import check_classes
from vflfs.datasets.npz_files import read_npz
from vflfs.datasets.paths import check_file

FORMATS = (".csv", ".parquet", ".npz")
CACHE_ENV = "VFLFS_CACHE_DIR"
_CACHE_VERSION = "1"


@dataclass(frozen=True, eq=False)
class PartyTable:
    """A party's file: ``ids`` (n,) text and ``X`` (n, d) float32, both read-only."""

    ids: np.ndarray
    X: np.ndarray

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])


def default_cache_dir() -> Path:
    """``$VFLFS_CACHE_DIR``, else ``$XDG_CACHE_HOME/vflfs``, else ``~/.cache/vflfs``."""
    if os.environ.get(CACHE_ENV, "").strip():
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "vflfs"


def load_party_file(
    path: str | os.PathLike[str], id_column: str = "id", cache_dir: str | None = None
) -> PartyTable:
    """A party's IDs and features, memory-mapped from the cache (filled on first use)."""
    file = Path(path).expanduser().absolute()
    if not file.is_file():
        raise DataError(
            f"the party's data file {file} does not exist; fix: correct data-path in the "
            "SuperNode's node config",
            public="the party's data file does not exist; fix: correct data-path in its "
            "SuperNode's node config",
        )
    folder = _cache_folder(file, id_column, cache_dir)
    if not (folder / "X.npy").is_file():
        ids, X = read_party_file(file, id_column)
        _write_cache(folder, {"ids": ids, "X": X})
    try:
        ids = np.load(folder / "ids.npy", mmap_mode="r", allow_pickle=False)
        X = np.load(folder / "X.npy", mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DataError(
            f"the cache of {file} in {folder} is unreadable ({exc}); fix: delete that folder",
            public="the cache of the party's data file is unreadable; fix: delete the cache "
            "folder its log names",
        ) from exc
    return PartyTable(ids=ids, X=X)


def read_party_file(file: Path, id_column: str) -> tuple[np.ndarray, np.ndarray]:
    """Parse a party file into (IDs as text, features as float32); checks everything."""
    kind = _kind(file)
    if kind == ".npz":
        arrays = _read_party_npz(file, id_column)
        raw_ids, X = arrays[id_column], arrays["X"]
        names = None
    else:
        frame = _read_table(file, kind, id_column)
        if len(frame) == 0:
            raise DataError(
                f"{file} has no rows (only a header); fix: give the party's file at least one "
                "sample",
                public="the party's data file has no rows (only a header); fix: give it at "
                "least one sample",
            )
        if id_column not in frame.columns:
            raise DataError(
                f"{file}: no ID column {id_column!r} (columns: {list(map(str, frame.columns))}); "
                "fix: set the SuperNode's node config id-column to the name of its ID column",
                public=f"the party's data file has no ID column {id_column!r}; fix: set the "
                "SuperNode's node config id-column to the name of its ID column",
            )
        raw_ids = frame[id_column].to_numpy()
        features = frame.drop(columns=[id_column])
        names = [str(c) for c in features.columns]
        X = _numeric(file, features)
    ids = _ids(file, raw_ids)
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2 or X.shape[0] != ids.shape[0] or X.shape[1] == 0:
        raise DataError(
            f"{file}: features have shape {X.shape} for {ids.shape[0]} IDs; fix: give every row "
            "an ID and at least one feature column",
            public=f"the party's features have shape {X.shape} for {ids.shape[0]} IDs; fix: "
            "give every row an ID and at least one feature column",
        )
    bad = ~np.isfinite(X).all(axis=0)
    if bad.any():
        where = names[int(np.flatnonzero(bad)[0])] if names else int(np.flatnonzero(bad)[0])
        raise DataError(
            f"{file}: NaN or infinite values in {int(bad.sum())} feature column(s) (first: "
            f"{where}); fix: impute or drop them before the run",
            public=f"NaN or infinite values in {int(bad.sum())} feature column(s) of the "
            "party's data file (its log names them); fix: impute or drop them before the run",
        )
    return ids, X


@dataclass(frozen=True, eq=False)
class LabelsFile:
    """The server's labels: IDs (text), the labels as a Dataset's ``y`` (with its task and
    classes), and where the file has a split column, the official split as row indices."""

    ids: np.ndarray
    labels: Dataset  # X is a placeholder column of zeros: the server holds no features
    classes: list[str] | None = None  # classification: the class names, by class id


def load_labels_file(
    path: str | os.PathLike[str],
    *,
    id_column: str = "id",
    label_column: str = "y",
    split_column: str | None = "split",
    task: str = "classification",
    classes: Sequence[object] | None = None,
    min_class_count: int | None = None,
) -> LabelsFile:
    """Read the server's labels file: only the ID, label and (if present) split columns.

    For classification the classes are ``classes`` (declared) or inferred, and checked
    (:func:`~vflfs.datasets.label_classes.check_classes`)."""
    file = check_file(Path(path).expanduser())
    columns = _label_columns(file, id_column, label_column, split_column)
    ids = _ids(file, columns[id_column])
    split = columns.get(split_column) if split_column else None
    train_idx = test_idx = None
    if split is not None:
        text = np.asarray([str(v) for v in split])
        unknown = sorted(set(text) - {"train", "test"})
        if unknown:
            raise DataError(
                f"{file}: split column {split_column!r} holds {unknown[:5]}; fix: use only "
                "'train' and 'test'"
            )
        train_idx, test_idx = np.flatnonzero(text == "train"), np.flatnonzero(text == "test")
    y, names = columns[label_column], None
    if task == "classification":
        found = check_classes(file.name, y, classes, min_class_count)
        y, names = found.y, found.names
    labels = make_dataset(
        f"labels:{file.name}",
        np.zeros((ids.shape[0], 1), np.float32),
        y,
        task,
        train_idx=train_idx,
        test_idx=test_idx,
    )
    return LabelsFile(ids=ids, labels=labels, classes=names)


def _read_party_npz(file: Path, id_column: str) -> dict[str, np.ndarray]:
    try:
        return read_npz(file, required=("X", id_column))
    except DataError as error:
        error.public = error.public or (
            f"the party's .npz data file is unreadable or lacks the arrays X and {id_column!r}; "
            "fix: save it with numpy.savez(path, X=X, <id column>=ids), numeric arrays only"
        )
        raise


def _label_columns(
    file: Path, id_column: str, label_column: str, split_column: str | None
) -> dict[str, np.ndarray]:
    wanted = [c for c in (id_column, label_column, split_column) if c]
    if _kind(file) == ".npz":
        arrays = read_npz(file, required=(id_column, label_column))
        return {k: arrays[k] for k in wanted if k in arrays}
    frame = _read_table(file, _kind(file), id_column, wanted)
    missing = [c for c in (id_column, label_column) if c not in frame.columns]
    if missing:
        raise DataError(
            f"{file}: no column(s) {missing} (it has {list(map(str, frame.columns))}); fix: set "
            "dataset.id_column and dataset.label_column to its ID and label columns"
        )
    return {c: frame[c].to_numpy() for c in wanted if c in frame.columns}


def _kind(file: Path) -> str:
    kind = file.suffix.lower()
    if kind not in FORMATS:
        raise DataError(
            f"{file}: unknown file type {kind!r}; fix: use one of {list(FORMATS)}",
            public=f"the data file's type {kind!r} is unknown; fix: use one of {list(FORMATS)}",
        )
    return kind


def _read_table(file: Path, kind: str, id_column: str, columns: list[str] | None = None):
    """Read a csv / parquet table (only ``columns`` when given, as far as they exist); a csv's
    ID column is read as text, as written."""
    import pandas as pd

    try:
        if kind == ".csv":
            use = None if columns is None else (lambda c: c in columns)
            return pd.read_csv(file, usecols=use, dtype={id_column: str})
        if columns is not None:
            import pyarrow.parquet as pq

            names = set(pq.read_schema(file).names)
            return pd.read_parquet(file, columns=[c for c in columns if c in names])
        return pd.read_parquet(file)
    except ImportError as exc:
        raise DataError(
            f"reading {file} needs an optional package ({exc}); fix: pip install 'vflfs[parquet]'",
            public="reading the data file needs an optional package; fix: pip install "
            "'vflfs[parquet]'",
        ) from exc
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise DataError(
            f"cannot read {file} ({exc}); fix: check the file format",
            public=f"the {kind} data file cannot be parsed; fix: check the file format",
        ) from exc


def _numeric(file: Path, features) -> np.ndarray:
    import pandas as pd

    bad = [
        str(c)
        for c in features.columns
        if not (
            pd.api.types.is_numeric_dtype(features[c]) or pd.api.types.is_bool_dtype(features[c])
        )
    ]
    if bad:
        raise DataError(
            f"{file}: feature column(s) {bad[:5]} are not numeric; fix: encode them as numbers "
            "(every column but the ID column is a feature)",
            public=f"{len(bad)} feature column(s) of the party's data file are not numeric (its "
            "log names them); fix: encode them as numbers (every column but the ID column is a "
            "feature)",
        )
    return features.to_numpy(dtype="float32", na_value=np.nan)


def _ids(file: Path, values: np.ndarray) -> np.ndarray:
    """IDs as text; no missing values and no duplicates."""
    import pandas as pd

    values = np.asarray(values).reshape(-1)
    if values.size == 0:
        raise DataError(
            f"{file} has no rows; fix: give at least one sample",
            public="the data file has no rows; fix: give at least one sample",
        )
    missing = int(np.count_nonzero(pd.isna(values)))
    if missing:
        raise DataError(
            f"{file}: {missing} sample ID(s) are missing; fix: give every row an ID",
            public=f"{missing} sample ID(s) are missing in the data file; fix: give every row "
            "an ID",
        )
    ids = np.asarray([str(v) for v in values.tolist()])
    unique, counts = np.unique(ids, return_counts=True)
    if unique.size != ids.size:
        dup = unique[counts > 1]
        raise DataError(
            f"{file}: {int(dup.size)} sample ID(s) occur more than once (e.g. {dup[:3].tolist()}); "
            "fix: give each row a distinct ID",
            public=f"{int(dup.size)} sample ID(s) occur more than once in the data file; fix: "
            "give each row a distinct ID",
        )
    return ids


def _cache_folder(file: Path, id_column: str, cache_dir: str | None) -> Path:
    stat = file.stat()
    key = "\0".join(
        [_CACHE_VERSION, str(file), str(stat.st_size), str(stat.st_mtime_ns), id_column]
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    return root / "party-files" / f"{file.stem}-{digest}"


def _write_cache(folder: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write the arrays into ``folder`` atomically (a temporary folder, then a rename)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        try:
            os.rename(tmp, folder)
        except OSError:
            if not (folder / "X.npy").is_file():  # not a concurrent writer that won the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
