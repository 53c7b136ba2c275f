"""Sample splits: train / validation / test row indices, chosen by the server (seeded).

Only indices travel to parties, never data. ``val_fraction`` is a share of the training rows.
Splits are stratified by class when asked, for classification labels (integer ``y``) only.
Where a class has too few rows for scikit-learn's stratified split (one row, or fewer rows
drawn than there are classes), the rows are drawn class by class as far as the classes allow,
each class keeping at least one row on the training side, and the run warns.
"""

from __future__ import annotations

import logging
import math
import operator
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split

from vflfs.datasets.errors import DataError
from vflfs.datasets.validation import check_rows

log = logging.getLogger("vflfs")


@dataclass(frozen=True, eq=False)
class SampleSplits:
    """Sorted int64 row indices of the train, validation and test sets (pairwise disjoint)."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


def split_samples(
    n: int,
    y: np.ndarray | None,
    seed: int,
    test_fraction: float = 0.2,
    val_fraction: float = 0.2,
    stratify: bool = True,
    train_idx: np.ndarray | None = None,
    test_idx: np.ndarray | None = None,
) -> SampleSplits:
    """Split rows ``0..n-1`` into train / validation / test.

    With an official split (``train_idx`` and ``test_idx``) its test rows are kept and the
    validation rows are drawn from its train rows; ``test_fraction`` is then unused.
    """
    n = _check_n(n)
    labels = _strata(n, y, stratify)
    _check_fraction("val_fraction", val_fraction)
    if train_idx is None and test_idx is None:
        _check_fraction("test_fraction", test_fraction)
        pool, test = draw_rows(np.arange(n), labels, test_fraction, seed, "test_fraction")
    elif train_idx is None or test_idx is None:
        raise DataError("an official split needs both train_idx and test_idx; fix: pass both")
    else:
        pool, test = _official(n, train_idx, test_idx)
    train, val = draw_rows(pool, labels, val_fraction, seed, "val_fraction")
    return _sorted(train, val, test)


def kfold_splits(
    n: int,
    y: np.ndarray | None,
    k: int,
    seed: int,
    val_fraction: float = 0.2,
    stratify: bool = True,
) -> list[SampleSplits]:
    """K-fold cross-validation: ``k`` splits whose test sets are disjoint and cover all rows;
    each fold's validation rows are drawn from its training rows."""
    n = _check_n(n)
    labels = _strata(n, y, stratify)
    _check_fraction("val_fraction", val_fraction)
    k = operator.index(k)
    if not 2 <= k <= n:
        raise DataError(f"k-fold needs 2 <= k <= n ({n}), got k={k}; fix: choose k in that range")
    if labels is None:
        splitter = KFold(n_splits=k, shuffle=True, random_state=seed)
    else:
        splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    try:
        folds = list(splitter.split(np.zeros((n, 1)), labels))
    except ValueError as exc:
        raise DataError(
            f"cannot make {k} stratified folds ({exc}); fix: use a smaller k or stratify=False"
        ) from exc
    splits = []
    for pool, test in folds:
        train, val = draw_rows(pool, labels, val_fraction, seed, "val_fraction")
        splits.append(_sorted(train, val, test))
    return splits


def _check_n(n: int) -> int:
    n = operator.index(n)
    if n < 2:
        raise DataError(f"cannot split {n} row(s); fix: load a dataset with at least 2 rows")
    return n


def _check_fraction(what: str, value: float) -> None:
    if not 0.0 <= float(value) < 1.0:
        raise DataError(f"{what} must be in [0, 1), got {value}; fix: use e.g. 0.2")


def _strata(n: int, y: np.ndarray | None, stratify: bool) -> np.ndarray | None:
    """Labels to stratify on, or None (no stratification, or not a classification y)."""
    if y is None:
        return None
    labels = np.asarray(y).reshape(-1)
    if labels.shape[0] != n:
        raise DataError(f"y has {labels.shape[0]} labels for {n} rows; fix: pass one per row")
    if not stratify or not np.issubdtype(labels.dtype, np.integer):
        return None
    return labels


def draw_rows(
    rows: np.ndarray, labels: np.ndarray | None, fraction: float, seed: int, what: str
) -> tuple[np.ndarray, np.ndarray]:
    """Split ``rows`` into (kept, drawn) with ``fraction`` of them drawn, stratified by
    ``labels`` (one per row of the dataset) where given: scikit-learn's split, else
    :func:`_draw_by_class` with a warning; ``what`` names the share in messages."""
    if fraction == 0:
        return rows, np.empty(0, dtype=np.int64)
    strata = None if labels is None else labels[rows]
    try:
        kept, drawn = train_test_split(
            rows, test_size=fraction, random_state=seed, shuffle=True, stratify=strata
        )
    except ValueError as exc:
        size = math.ceil(fraction * rows.size)  # train_test_split's count of a float share
        if strata is None or not 0 < size < rows.size:
            raise DataError(
                f"cannot draw {what}={fraction} of {rows.size} rows"
                f"{' stratified by class' if strata is not None else ''} ({exc}); fix: change "
                f"{what}, or load more rows"
            ) from exc
        kept, drawn = _draw_by_class(rows, strata, size, seed)
        classes, counts = np.unique(strata, return_counts=True)
        log.warning(
            "%s=%s of %d rows of %d classes (the smallest with %d row(s)): too few for a "
            "stratified split; drew %d rows class by class, each class keeping at least one "
            "row on the training side",
            what,
            fraction,
            rows.size,
            classes.size,
            counts.min(),
            drawn.size,
        )
    return kept, drawn


def _draw_by_class(
    rows: np.ndarray, strata: np.ndarray, size: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(kept, drawn), ``size`` rows drawn: each class gives its share of them (rounded down,
    then one more to the classes of the largest remainders), at most all its rows but one; what
    the classes cannot give is drawn from the rows left."""
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(strata, return_counts=True)
    share = size * counts / counts.sum()
    take = np.minimum(np.floor(share).astype(int), counts - 1)
    for i in np.argsort(np.floor(share) - share, kind="stable"):  # largest remainder first
        if take.sum() < size and take[i] < counts[i] - 1:
            take[i] += 1
    parts = [
        rng.choice(rows[strata == c], t, replace=False) for c, t in zip(classes, take, strict=True)
    ]
    drawn = np.concatenate(parts)
    rest = np.setdiff1d(rows, drawn)
    drawn = np.concatenate([drawn, rng.choice(rest, size - drawn.size, replace=False)])
    return np.setdiff1d(rows, drawn), drawn


def _official(n: int, train_idx: np.ndarray, test_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    train = check_rows(train_idx, n, "official train_idx")
    test = check_rows(test_idx, n, "official test_idx")
    overlap = np.intersect1d(train, test)
    if overlap.size:
        raise DataError(
            f"official train_idx and test_idx share {overlap.size} row(s) (first "
            f"{overlap[:5].tolist()}); fix: pass a disjoint split"
        )
    return train, test


def _sorted(train: np.ndarray, val: np.ndarray, test: np.ndarray) -> SampleSplits:
    def clean(rows: np.ndarray) -> np.ndarray:
        return np.sort(np.asarray(rows, dtype=np.int64))

    return SampleSplits(train=clean(train), val=clean(val), test=clean(test))
