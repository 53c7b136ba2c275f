"""Per-column min-max scaling to [0, 1], fitted on the training rows only (no leakage)."""

from __future__ import annotations

import numpy as np

from vflfs.datasets.validation import check_rows


def minmax_scale(X: np.ndarray, train_rows: np.ndarray) -> np.ndarray:
    """Scale every column of ``X`` to [0, 1] on ``X[train_rows]``: scikit-learn's
    ``MinMaxScaler`` fitted there, the same arithmetic in numpy (a party rebuilds its view in
    every fresh process, where importing scikit-learn would cost a second).

    Training rows land in [0, 1]; other rows may fall outside it. Constant columns map to 0
    on the training rows (a zero range counts as 1, as in scikit-learn), never NaN. Returns
    float32.
    """
    X = np.asarray(X)
    if X.dtype not in (np.float64, np.float32, np.float16):
        X = X.astype(np.float64)
    rows = check_rows(train_rows, X.shape[0], "train_rows")
    fit = X[rows]
    low, high = np.nanmin(fit, axis=0), np.nanmax(fit, axis=0)
    span = high - low
    span[span < 10 * np.finfo(span.dtype).eps] = 1.0
    scale = 1 / span
    shift = 0 - low * scale
    out = X * scale
    out += shift
    return out.astype(np.float32, copy=False)


def center(X: np.ndarray, train_rows: np.ndarray) -> np.ndarray:
    """Subtract each column's mean over ``X[train_rows]`` (float32).

    Min-max scaled columns all sit in [0, 1]; their common offset makes a bottom model's first
    layer start far from its data and can leave the whole split model at the uniform
    prediction. Centred inputs train on every seed, and a closed gate then sets its feature
    to the training mean.
    """
    X = np.asarray(X, dtype=np.float32)
    rows = check_rows(train_rows, X.shape[0], "train_rows")
    if len(rows) == 0:
        return X
    return X - X[rows].mean(axis=0, dtype=np.float64).astype(np.float32)
