"""Per-column min-max scaling to [0, 1], fitted on the training rows only (no leakage)."""

from __future__ import annotations

import numpy as np
from sklearn.preprocessing import MinMaxScaler

from vflfs.datasets.validation import check_rows


def minmax_scale(X: np.ndarray, train_rows: np.ndarray) -> np.ndarray:
    """Scale every column of ``X`` with a MinMaxScaler fitted on ``X[train_rows]``.

    Training rows land in [0, 1]; other rows may fall outside it. Constant columns map to 0
    on the training rows (scikit-learn treats a zero range as 1), never NaN. Returns float32.
    """
    X = np.asarray(X)
    rows = check_rows(train_rows, X.shape[0], "train_rows")
    scaler = MinMaxScaler().fit(X[rows])
    return scaler.transform(X).astype(np.float32, copy=False)


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
