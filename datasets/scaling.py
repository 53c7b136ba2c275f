"""Per-column scaling to [0, 1], fitted on the training rows only (no leakage).

:func:`minmax_scale` is the papers' scaling (spec section 2). :func:`scale_columns` with
``"auto"`` (the default) keeps it for every column it serves and replaces it by the column's
empirical distribution function where a few extreme values would squash the rest: a
heavy-tailed column (a log-normal amount, a count) or one with gross outliers. Min-max maps
such a column's bulk into a sliver of [0, 1] that a bottom model, a gate or an equal-width
Gini bin cannot tell apart from a constant.
"""

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


SCALINGS = ("auto", "minmax")
SQUASHED = 0.2  # "auto": a column whose central 98% of training values fill < this of its range
TIED = 0.5  # ... and whose most frequent value holds < this share of them (not sparse counts)


def scale_columns(X: np.ndarray, train_rows: np.ndarray, method: str = "auto") -> np.ndarray:
    """Every column of ``X`` in [0, 1] on ``X[train_rows]`` (float32).

    ``"minmax"``: :func:`minmax_scale`. ``"auto"``: the same, except for the columns
    :func:`squashed_columns` finds, which take their training rows' empirical distribution
    function (mid-ranks for ties; other rows by where they fall among the training values, so
    0 below the training minimum and 1 above its maximum): order-preserving, and blind to the
    tail's size. Deterministic, numpy only (a party builds its view in every fresh process).
    """
    if method not in SCALINGS:
        raise ValueError(f"scaling must be one of {SCALINGS}, got {method!r}")
    out = minmax_scale(X, train_rows)
    if method == "minmax" or out.shape[0] == 0:
        return out
    rows = check_rows(train_rows, out.shape[0], "train_rows")
    X = np.asarray(X)
    for j in squashed_columns(out[rows]):
        fit = np.sort(X[rows, j])
        below = np.searchsorted(fit, X[:, j], side="left")
        upto = np.searchsorted(fit, X[:, j], side="right")
        out[:, j] = (below + upto) / (2.0 * len(fit))
    return out


def squashed_columns(scaled: np.ndarray) -> np.ndarray:
    """Columns of min-max ``scaled`` training rows whose central 98% (1st to 99th percentile)
    spans less than ``SQUASHED`` of [0, 1] while it spans something, and whose most frequent
    value holds less than ``TIED`` of the rows: 2% of the rows take most of the range.
    A sparse column (mostly one value, e.g. a word's count) is left to min-max: its spread is
    in the few other values."""
    if scaled.shape[0] < 2:
        return np.zeros(0, dtype=np.int64)
    low, high = np.quantile(scaled, [0.01, 0.99], axis=0)
    central = high - low
    candidates = np.flatnonzero((central > 0) & (central < SQUASHED))
    keep = []
    for j in candidates:
        values = np.sort(scaled[:, j])
        runs = np.diff(np.flatnonzero(np.diff(values, prepend=np.nan, append=np.nan)))
        if runs.max() < TIED * len(values):
            keep.append(j)
    return np.asarray(keep, dtype=np.int64)


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
