"""Checks shared by every loader: one :func:`validate` for whole datasets, and row-index checks."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from vflfs.datasets.errors import DataError

if TYPE_CHECKING:
    from vflfs.datasets.dataset import Dataset


def validate(dataset: Dataset) -> None:
    """Raise a DataError if ``dataset`` is unusable.

    Checks: X is 2-D and y 1-D with the same number of rows, neither is empty, no NaN or
    infinite values, at least two classes (classification), labels in 0..c-1, the official
    split and the relevant columns in range, and the image shape matching the column count.
    """
    _check_shapes(dataset)
    _check_finite(dataset.name, "X", dataset.X)
    _check_finite(dataset.name, "y", dataset.y)
    _check_labels(dataset)
    _check_extras(dataset)


def _check_shapes(ds: Dataset) -> None:
    if ds.X.ndim != 2 or ds.y.ndim != 1:
        raise DataError(
            f"dataset '{ds.name}': X has shape {ds.X.shape} and y {ds.y.shape}; fix: X must "
            "be (n_samples, n_features) and y (n_samples,)"
        )
    n, d = ds.X.shape
    if n == 0 or d == 0:
        raise DataError(
            f"dataset '{ds.name}' is empty (X has shape {ds.X.shape}); fix: load a file with "
            "at least one row and one feature column"
        )
    if ds.y.shape[0] != n:
        raise DataError(
            f"dataset '{ds.name}': X has {n} rows but y has {ds.y.shape[0]}; fix: give exactly "
            "one label per row of X"
        )


def _check_finite(name: str, what: str, values: np.ndarray) -> None:
    finite = np.isfinite(values)
    if finite.all():
        return
    n_nan = int(np.count_nonzero(np.isnan(values)))
    n_inf = int(values.size - np.count_nonzero(finite) - n_nan)
    bad = ~finite if values.ndim == 1 else (~finite).any(axis=0)
    where = "row" if values.ndim == 1 else "column"
    first = int(np.flatnonzero(bad)[0])
    raise DataError(
        f"dataset '{name}': {what} has {n_nan} NaN and {n_inf} infinite value(s) (first in "
        f"{where} {first}); fix: impute or drop those values before loading"
    )


def _check_labels(ds: Dataset) -> None:
    if ds.task == "regression":
        return
    if ds.n_classes < 2:
        raise DataError(
            f"dataset '{ds.name}' has {ds.n_classes} class(es); classification needs at least "
            "2; fix: check the label column, or use task='regression' for continuous targets"
        )
    if ds.y.min() < 0 or ds.y.max() >= ds.n_classes:
        raise DataError(
            f"dataset '{ds.name}': class ids must lie in 0..{ds.n_classes - 1}, found "
            f"{ds.y.min()}..{ds.y.max()}; fix: recode the labels (np.unique(..., "
            "return_inverse=True))"
        )


def _check_extras(ds: Dataset) -> None:
    if (ds.train_idx is None) != (ds.test_idx is None):
        raise DataError(
            f"dataset '{ds.name}' has only one of train_idx/test_idx; fix: give both or neither"
        )
    if ds.train_idx is not None and ds.test_idx is not None:
        check_rows(ds.train_idx, ds.n_samples, f"dataset '{ds.name}' train_idx")
        check_rows(ds.test_idx, ds.n_samples, f"dataset '{ds.name}' test_idx")
        overlap = np.intersect1d(ds.train_idx, ds.test_idx)
        if overlap.size:
            raise DataError(
                f"dataset '{ds.name}': {overlap.size} row(s) are in both train_idx and "
                f"test_idx (first {overlap[:5].tolist()}); fix: make the official split disjoint"
            )
    if ds.relevant is not None:
        check_rows(ds.relevant, ds.n_features, f"dataset '{ds.name}' relevant columns")
    if ds.image_shape is not None:
        h, w = ds.image_shape
        if h * w != ds.n_features:
            raise DataError(
                f"dataset '{ds.name}': image_shape {ds.image_shape} has {h * w} pixels but X "
                f"has {ds.n_features} columns; fix: give the (height, width) of the images"
            )


def check_rows(rows: object, n: int, what: str = "row indices") -> np.ndarray:
    """Return ``rows`` as a 1-D int64 array, or raise if it is empty, not integer, has
    duplicates, or is out of range ``0..n-1``."""
    array = np.asarray(rows)
    if array.ndim != 1 or array.size == 0:
        raise DataError(
            f"{what} must be a non-empty 1-D index array, got shape {array.shape}; fix: pass "
            "at least one index"
        )
    if not np.issubdtype(array.dtype, np.integer):
        raise DataError(
            f"{what} must be integers, got dtype {array.dtype}; fix: pass integer indices"
        )
    bad = array[(array < 0) | (array >= n)]
    if bad.size:
        raise DataError(
            f"{what}: {bad.size} index(es) out of range 0..{n - 1} (first {bad[:5].tolist()}); "
            "fix: use indices of the data actually loaded"
        )
    if np.unique(array).size != array.size:
        raise DataError(f"{what} contain duplicates; fix: give each index once")
    return array.astype(np.int64, copy=False)
