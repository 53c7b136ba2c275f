"""Converters from each benchmark source's own format to the arrays of a ``<name>.npz`` file.

Every converter returns ``X`` (float32, rows in the order of the source), ``y`` (int64, labels
recoded to 0..K-1), ``classes`` (int64, the original label values: ``classes[y]``) and, where the
source has them, ``train_idx``/``test_idx`` (the official split) and ``X_test_unlabeled``.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.io
import scipy.sparse

from vflfs.datasets.errors import DataError

Arrays = dict[str, np.ndarray]


def recode_labels(labels: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(y, classes)``: ``y`` in 0..K-1 (int64) and the sorted original values (int64)."""
    values = np.asarray(labels).ravel()
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
            raise DataError(f"{where}: labels are not all integers; fix: check the source file")
        values = values.astype(np.int64)
    elif values.dtype.kind not in "iu":
        raise DataError(f"{where}: labels of dtype {values.dtype} are not integers")
    classes, y = np.unique(values, return_inverse=True)
    return y.astype(np.int64), classes.astype(np.int64)


def labelled_arrays(X: np.ndarray, labels: np.ndarray, where: str) -> Arrays:
    """``X`` as C-ordered float32 with ``y`` and ``classes``, after checking the row counts."""
    X = np.ascontiguousarray(X, dtype=np.float32)
    if X.ndim != 2 or len(X) != np.asarray(labels).size:
        raise DataError(
            f"{where}: {np.asarray(labels).size} labels for features of shape {X.shape}; fix: "
            "use the matching data and labels files of the source"
        )
    if not np.all(np.isfinite(X)):
        raise DataError(f"{where}: the features hold NaN or infinite values")
    y, classes = recode_labels(labels, where)
    return {"X": X, "y": y, "classes": classes}


def from_scikit_feature_mat(path: Path) -> Arrays:
    """A scikit-feature repository ``.mat`` file: ``X`` (n x d, dense or sparse), ``Y`` (n x 1)."""
    try:
        mat = scipy.io.loadmat(path)
    except (OSError, ValueError, NotImplementedError) as exc:
        raise DataError(f"cannot read {path} as a MATLAB .mat file ({exc})") from exc
    missing = [key for key in ("X", "Y") if key not in mat]
    if missing:
        keys = sorted(k for k in mat if not k.startswith("__"))
        raise DataError(
            f"{path} lacks the variable(s) {missing} (it has {keys}); a scikit-feature "
            "repository file holds the features as X and the labels as Y"
        )
    X = mat["X"]
    if scipy.sparse.issparse(X):
        X = X.toarray()
    return labelled_arrays(np.asarray(X), mat["Y"], str(path))


def read_matrix(source: Path | bytes) -> np.ndarray:
    """A whitespace-separated numeric text table (the challenges' ``.data`` files) as float64."""
    handle = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        frame = pd.read_csv(handle, sep=r"\s+", header=None, dtype=np.float64)
    except (ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"cannot read a numeric table from {_describe(source)} ({exc})") from exc
    return frame.to_numpy()


def read_labels(source: Path | bytes) -> np.ndarray:
    """A ``.labels`` file: one integer label per line."""
    matrix = read_matrix(source)
    if matrix.shape[1] != 1:
        raise DataError(f"{_describe(source)} has {matrix.shape[1]} columns; a labels file has 1")
    return matrix[:, 0]


def from_challenge_files(
    train_data: Path | bytes,
    train_labels: Path | bytes,
    valid_data: Path | bytes | None = None,
    valid_labels: Path | bytes | None = None,
    test_data: Path | bytes | None = None,
) -> Arrays:
    """The NIPS 2003 and agnostic-learning challenges' text files.

    Rows are the training rows, then the validation rows when given (then ``train_idx`` and
    ``test_idx`` name the official split); the unlabelled test rows become ``X_test_unlabeled``.
    """
    blocks = [read_matrix(train_data)]
    labels = [read_labels(train_labels)]
    if (valid_data is None) != (valid_labels is None):
        raise DataError("the validation split needs both its data and its labels file")
    if valid_data is not None and valid_labels is not None:
        blocks.append(read_matrix(valid_data))
        labels.append(read_labels(valid_labels))
    widths = {block.shape[1] for block in blocks}
    if len(widths) != 1:
        raise DataError(f"the data files have different numbers of columns: {sorted(widths)}")
    arrays = labelled_arrays(np.vstack(blocks), np.concatenate(labels), _describe(train_data))
    if len(blocks) == 2:
        n_train = len(blocks[0])
        arrays["train_idx"] = np.arange(n_train, dtype=np.int64)
        arrays["test_idx"] = np.arange(n_train, len(arrays["y"]), dtype=np.int64)
    if test_data is not None:
        test = read_matrix(test_data)
        if test.shape[1] != arrays["X"].shape[1]:
            raise DataError(f"the test rows have {test.shape[1]} columns, not {widths.pop()}")
        arrays["X_test_unlabeled"] = np.ascontiguousarray(test, dtype=np.float32)
    return arrays


def from_openml_frame(features: pd.DataFrame, target: pd.Series) -> Arrays:
    """``fetch_openml(..., as_frame=True)``'s ``data`` and ``target``: numeric or nominal columns
    whose category names are numbers (as in Phishing's ARFF), in OpenML's row order."""
    X = np.column_stack([_numeric(features[column], column) for column in features.columns])
    arrays = labelled_arrays(X, _numeric(target, str(target.name)), "the OpenML table")
    arrays["feature_names"] = np.array([str(c) for c in features.columns], dtype=np.str_)
    return arrays


def zip_member(archive: Path, basename: str) -> bytes:
    """The bytes of the member of a ``.zip`` whose file name (without folders) is ``basename``."""
    try:
        with zipfile.ZipFile(archive) as zf:
            names = [n for n in zf.namelist() if n.rsplit("/", 1)[-1] == basename]
            if not names:
                raise DataError(f"{archive} has no file {basename}; it holds {zf.namelist()}")
            return zf.read(names[0])
    except zipfile.BadZipFile as exc:
        raise DataError(f"{archive} is not a zip archive ({exc})") from exc


def _numeric(column: pd.Series, name: str) -> np.ndarray:
    values = column.astype(str) if isinstance(column.dtype, pd.CategoricalDtype) else column
    numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    if np.isnan(numbers).any():
        raise DataError(f"column {name!r} of the OpenML table has missing or non-numeric values")
    return numbers


def _describe(source: Path | bytes) -> str:
    return f"{len(source)} bytes" if isinstance(source, bytes) else str(source)
