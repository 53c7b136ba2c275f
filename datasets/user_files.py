"""Loaders for the user's own files: ``npz`` (arrays X, y) and ``csv`` / ``parquet`` tables.

``path`` is absolute or relative to the data directory (``dataset.data_dir`` /
``VFLFS_DATA_DIR``; the current directory when neither is set). ``relevant`` (optional) lists
the columns known to carry the signal, so that ``results.json`` reports the selection's
precision and recall (:mod:`vflfs.datasets.relevant`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from vflfs.datasets.dataset import Dataset, check_task, make_dataset
from vflfs.datasets.errors import DataError
from vflfs.datasets.npz_files import read_npz
from vflfs.datasets.paths import check_file, resolve_user_path
from vflfs.datasets.registry import Loader, register_dataset
from vflfs.datasets.relevant import relevant_indices


@register_dataset("npz")
def load_npz(
    data_dir: Path | None,
    *,
    path: str,
    task: str = "classification",
    relevant: Sequence[int] | None = None,
) -> Dataset:
    """Read a user ``.npz`` with keys ``X``, ``y`` and optional ``train_idx``/``test_idx``;
    ``relevant``: the known relevant columns of X (indices), if any."""
    check_task(task)
    file = resolve_user_path(path, data_dir)
    arrays = read_npz(file)
    n_features = int(arrays["X"].shape[1]) if arrays["X"].ndim == 2 else 0
    return make_dataset(
        f"npz:{file.name}",
        arrays["X"],
        arrays["y"],
        task,
        train_idx=arrays.get("train_idx"),
        test_idx=arrays.get("test_idx"),
        relevant=relevant_indices(relevant, n_features) if n_features else None,
    )


# Each table format: how to read it, and the loader's docstring.
TABLE_FORMATS: dict[str, tuple[Callable[[Path], pd.DataFrame], str]] = {
    "csv": (
        pd.read_csv,
        "Read a user CSV (header row required); every column but the label and "
        "``drop_columns`` (e.g. an ID column) is a numeric feature.",
    ),
    "parquet": (
        pd.read_parquet,
        "Read a user Parquet file (needs pyarrow); same columns rules as ``csv``.",
    ),
}


def _table_loader(kind: str) -> Loader:
    """The loader of ``kind`` tables: read the file, then :func:`frame_dataset`."""
    reader, doc = TABLE_FORMATS[kind]

    def load(
        data_dir: Path | None,
        *,
        path: str,
        label_column: str | None = None,
        task: str = "classification",
        drop_columns: Sequence[str] = (),
        relevant: Sequence[int | str] | None = None,
    ) -> Dataset:
        check_task(task)
        file = check_file(resolve_user_path(path, data_dir))
        try:
            frame = reader(file)
        except ImportError as exc:
            raise DataError(
                f"reading {file} needs an optional package ({exc}); fix: pip install "
                "'vflfs[parquet]'"
            ) from exc
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            raise DataError(
                f"cannot read {file} as {kind} ({exc}); fix: check the file format"
            ) from exc
        name = f"{kind}:{file.name}"
        return frame_dataset(name, frame, label_column, task, drop_columns, relevant)

    load.__name__ = f"load_{kind}"
    load.__doc__ = doc
    return load


for _kind in TABLE_FORMATS:
    register_dataset(_kind)(_table_loader(_kind))


def frame_dataset(
    name: str,
    frame: pd.DataFrame,
    label_column: str | None,
    task: str = "classification",
    drop_columns: Sequence[str] = (),
    relevant: Sequence[int | str] | None = None,
) -> Dataset:
    """Turn a table into a :class:`Dataset`: ``label_column`` is y, the other columns X;
    ``relevant`` (feature column indices or names) the known relevant columns, if any."""
    available = [str(c) for c in frame.columns]
    if label_column is None or label_column not in frame.columns:
        raise DataError(
            f"dataset '{name}': label column {label_column!r} is not in the header; fix: set "
            f"the parameter label_column to one of {available}"
        )
    unknown = [c for c in drop_columns if c not in frame.columns]
    if unknown:
        raise DataError(
            f"dataset '{name}': drop_columns {unknown} are not in the header; fix: use names "
            f"from {available}"
        )
    features = frame.drop(columns=[label_column, *drop_columns])
    non_numeric = [str(c) for c in features.columns if not _is_numeric(features[c])]
    if non_numeric:
        raise DataError(
            f"dataset '{name}': feature column(s) {non_numeric} are not numeric; fix: encode "
            "them as numbers, or list them in drop_columns"
        )
    with_missing = [str(c) for c in features.columns[features.isna().any().to_numpy()]]
    if with_missing:
        raise DataError(
            f"dataset '{name}': feature column(s) {with_missing} have missing values; fix: "
            "impute them or drop those rows/columns before loading"
        )
    names = [str(c) for c in features.columns]
    return make_dataset(
        name,
        features.to_numpy(dtype="float32"),
        frame[label_column].to_numpy(),
        task,
        relevant=relevant_indices(relevant, len(names), names=names),
    )


def _is_numeric(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)
