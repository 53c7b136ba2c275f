"""Spurious features (LESS-VFL protocol): Gaussian noise columns, independent of the labels,
appended to a party's block so feature selection can be scored on removing them."""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np

from vflfs.datasets.errors import DataError
from vflfs.datasets.validation import check_rows

UNEVEN_RATIOS = (0.8, 0.25, 0.1, 0.0)


def add_spurious_features(
    X: np.ndarray, train_rows: np.ndarray, ratio: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Append ``round(ratio * d)`` noise columns to ``X`` (n, d).

    Noise is drawn for every row from N(mean, ((max - min) / 2)^2), with mean, max and min taken
    over the whole training matrix ``X[train_rows]`` (the official LESS-VFL code). Returns
    (X_new float32, mask) where the bool mask over X_new's columns is True on the noise.
    """
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2:
        raise DataError(f"X must be 2-D (n, d), got shape {X.shape}; fix: pass a matrix")
    ratio = _check_ratio(ratio, "ratio")
    rows = check_rows(train_rows, X.shape[0], "train_rows")
    n_noise = round(ratio * X.shape[1])
    if n_noise == 0:
        return X, np.zeros(X.shape[1], dtype=bool)
    train = X[rows]
    mean = float(train.mean())
    std = (float(train.max()) - float(train.min())) / 2.0
    noise = np.random.default_rng(seed).normal(mean, std, size=(X.shape[0], n_noise))
    mask = np.concatenate([np.zeros(X.shape[1], dtype=bool), np.ones(n_noise, dtype=bool)])
    return np.hstack([X, noise.astype(np.float32)]), mask


def noise_ratios(n_parties: int, spec: float | Sequence[float] | str) -> list[float]:
    """Per-party spurious-feature ratios from a config value.

    ``spec`` is one number (the same for every party), a list with one number per party, or
    ``"uneven"`` = [0.8, 0.25, 0.1, 0.0] (exactly 4 parties).
    """
    if isinstance(spec, str):
        if spec != "uneven":
            raise DataError(
                f"unknown noise ratio spec {spec!r}; fix: use a number, a list with one number "
                "per party, or 'uneven'"
            )
        if n_parties != len(UNEVEN_RATIOS):
            raise DataError(
                f"noise ratios 'uneven' = {list(UNEVEN_RATIOS)} are for exactly 4 parties, got "
                f"{n_parties}; fix: use 4 parties or give a list with one ratio per party"
            )
        return list(UNEVEN_RATIOS)
    if isinstance(spec, numbers.Real):
        return [_check_ratio(spec, "noise ratio")] * n_parties
    if isinstance(spec, Sequence):
        if len(spec) != n_parties:
            raise DataError(
                f"noise ratios {list(spec)} give {len(spec)} value(s) for {n_parties} parties; "
                "fix: give exactly one ratio per party"
            )
        return [_check_ratio(r, f"noise ratio of party {i}") for i, r in enumerate(spec)]
    raise DataError(f"noise ratio spec {spec!r} is not a number, a list or 'uneven'; fix: use one")


def _check_ratio(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise DataError(f"{what} must be a number, got {value!r}; fix: use e.g. 0.5")
    ratio = float(value)
    if not np.isfinite(ratio) or ratio < 0:
        raise DataError(f"{what} must be a finite number >= 0, got {value}; fix: use e.g. 0.5")
    return ratio
