"""Tiny source files in each benchmark source's own format, and the arrays they convert to."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

RNG = np.random.default_rng(0)


def expected(X: np.ndarray, labels: np.ndarray, **extra: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays a correct conversion gives, built by hand."""
    classes = np.unique(labels).astype(np.int64)
    y = np.searchsorted(classes, labels).astype(np.int64)
    return {"X": X.astype(np.float32), "y": y, "classes": classes, **extra}


def text_table(rows: np.ndarray) -> str:
    """A challenge-style text table: space-separated integers, a trailing space on each line."""
    return "".join(" ".join(str(int(v)) for v in row) + " \n" for row in np.atleast_2d(rows))


def write_uci_zip(path: Path, name: str, tables: dict[str, np.ndarray]) -> None:
    """UCI's archive of a NIPS 2003 dataset: ``NAME/name_<part>`` files, the validation labels
    beside the folder (``tables`` maps ``train.data`` etc. to rows)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for part, rows in tables.items():
            folder = "" if part == "valid.labels" else f"{name.upper()}/"
            zf.writestr(f"{folder}{name}_{part}", text_table(rows))
        zf.writestr("Dataset.pdf", b"%PDF-1.4")


def madelon_sources(folder: Path) -> dict[str, np.ndarray]:
    """A tiny UCI ``madelon.zip`` (train, valid and test data, train and valid labels)."""
    train, valid, test = (RNG.integers(0, 999, size=(n, 6)) for n in (8, 4, 3))
    train_labels, valid_labels = np.tile([-1, 1], 4), np.array([1, 1, -1, 1])
    tables = {
        "train.data": train,
        "train.labels": train_labels[:, None],
        "valid.data": valid,
        "valid.labels": valid_labels[:, None],
        "test.data": test,
    }
    write_uci_zip(folder / "madelon.zip", "madelon", tables)
    return expected(
        np.vstack([train, valid]),
        np.concatenate([train_labels, valid_labels]),
        train_idx=np.arange(8, dtype=np.int64),
        test_idx=np.arange(8, 12, dtype=np.int64),
        X_test_unlabeled=test.astype(np.float32),
    )
