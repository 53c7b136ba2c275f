"""Tiny source files in each benchmark source's own format, and the arrays they convert to."""

from __future__ import annotations

from pathlib import Path

import numpy as np

RNG = np.random.default_rng(0)


def expected(X: np.ndarray, labels: np.ndarray, **extra: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays a correct conversion gives, built by hand."""
    classes = np.unique(labels).astype(np.int64)
    y = np.searchsorted(classes, labels).astype(np.int64)
    return {"X": X.astype(np.float32), "y": y, "classes": classes, **extra}


def write_text(path: Path, rows: np.ndarray) -> None:
    """A challenge-style text table: space-separated integers, a trailing space on each line."""
    path.write_text("".join(" ".join(str(int(v)) for v in row) + " \n" for row in rows))


def madelon_sources(folder: Path) -> dict[str, np.ndarray]:
    """Tiny UCI MADELON files (train, valid, test data; train and valid labels) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    train, valid, test = (RNG.integers(0, 999, size=(n, 6)) for n in (8, 4, 3))
    train_labels, valid_labels = np.tile([-1, 1], 4), np.array([1, 1, -1, 1])
    write_text(folder / "madelon_train.data", train)
    write_text(folder / "madelon_valid.data", valid)
    write_text(folder / "madelon_test.data", test)
    write_text(folder / "madelon_train.labels", train_labels[:, None])
    write_text(folder / "madelon_valid.labels", valid_labels[:, None])
    return expected(
        np.vstack([train, valid]),
        np.concatenate([train_labels, valid_labels]),
        train_idx=np.arange(8, dtype=np.int64),
        test_idx=np.arange(8, 12, dtype=np.int64),
        X_test_unlabeled=test.astype(np.float32),
    )
