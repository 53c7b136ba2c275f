"""The in-memory dataset: features, labels, task, and what is known about the columns."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from vflfs.datasets.errors import DataError
from vflfs.datasets.label_classes import fractional
from vflfs.datasets.validation import validate

TASKS = ("classification", "regression")


@dataclass(frozen=True, eq=False)
class Dataset:
    """One dataset, all columns, all labels (the simulation's global view).

    ``X`` is float32 (n, d); ``y`` holds int64 class ids 0..c-1 (classification) or float32
    values (regression, ``n_classes`` = 0). ``train_idx``/``test_idx`` are the source's official
    split where it has one; ``relevant`` lists the known relevant columns of synthetic sets;
    ``image_shape`` is (H, W) for image data. Arrays built by :func:`make_dataset` are read-only.
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    task: str
    n_classes: int
    train_idx: np.ndarray | None = None
    test_idx: np.ndarray | None = None
    relevant: np.ndarray | None = None
    image_shape: tuple[int, int] | None = None

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of columns."""
        return int(self.X.shape[1])


def check_task(task: str) -> str:
    """Return ``task`` if it is a known task, else raise a DataError listing the tasks."""
    if task not in TASKS:
        raise DataError(f"unknown task {task!r}; fix: use one of {list(TASKS)}")
    return task


# At least this many distinct labels, under two rows each on average: a continuous target
MANY_CLASSES = 20


def encode_labels(name: str, y: np.ndarray) -> tuple[np.ndarray, int]:
    """Recode class labels of any type to int64 ids 0..c-1 (sorted by ``np.unique``)."""
    import pandas as pd  # on use: a party's process never imports it

    missing = int(np.count_nonzero(pd.isna(y)))
    if missing:
        first = int(np.flatnonzero(pd.isna(y))[0])
        raise DataError(
            f"dataset '{name}': y has {missing} missing/NaN label(s) (first at row {first}); "
            "fix: drop the unlabelled rows or fill in their labels"
        )
    try:
        classes, ids = np.unique(y, return_inverse=True)
    except TypeError as exc:
        raise DataError(
            f"dataset '{name}': the labels mix types that cannot be sorted ({exc}); fix: "
            "give every label the same type (all numbers or all strings)"
        ) from exc
    _check_class_labels(name, np.asarray(y), classes)
    return ids.reshape(-1).astype(np.int64), int(classes.size)


def _check_class_labels(name: str, y: np.ndarray, classes: np.ndarray) -> None:
    """Labels that read as a continuous target, not classes: fractional numbers, or
    :data:`MANY_CLASSES` or more distinct values with under two rows a class on average (a
    class then cannot be in both a training and a test row)."""
    regression = "fix: the dataset's task=regression (dataset.params.task=regression)"
    continuous = fractional(classes)
    if continuous.size:
        raise DataError(
            f"dataset '{name}': y holds fractional numbers ({continuous.size} distinct, "
            f"e.g. {continuous[0]:g}), a continuous target rather than class labels; "
            f"{regression} for a continuous target, or recode y as class labels"
        )
    if classes.size >= MANY_CLASSES and classes.size > y.size / 2:
        raise DataError(
            f"dataset '{name}': y has {classes.size} distinct values in {y.size} rows, "
            f"fewer than two rows per class; {regression} for a continuous target, or check "
            "that y holds the class labels (not an ID column)"
        )


def _as_float32(name: str, what: str, values: object, ndim: int) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise DataError(
            f"dataset '{name}': {what} is not numeric ({exc}); fix: encode every value as a "
            "number before loading"
        ) from exc
    if array.ndim != ndim:
        raise DataError(
            f"dataset '{name}': {what} has shape {array.shape}, expected {ndim} dimension(s); "
            "fix: X must be (n_samples, n_features) and y (n_samples,)"
        )
    return array


def _as_index(values: object) -> np.ndarray | None:
    return None if values is None else np.asarray(values, dtype=np.int64).reshape(-1)


def make_dataset(
    name: str,
    X: object,
    y: object,
    task: str = "classification",
    *,
    train_idx: object = None,
    test_idx: object = None,
    relevant: object = None,
    image_shape: tuple[int, int] | None = None,
) -> Dataset:
    """Build a validated, read-only :class:`Dataset` from raw arrays.

    Casts X to float32, recodes classification labels to 0..c-1 (regression labels to float32),
    runs :func:`~vflfs.datasets.validation.validate`, and marks every array read-only.
    """
    check_task(task)
    features = _as_float32(name, "X", X, ndim=2)
    labels = np.asarray(y)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels.reshape(-1)
    if task == "classification":
        if labels.ndim != 1:
            raise DataError(
                f"dataset '{name}': y has shape {labels.shape}; fix: give one label per row"
            )
        labels, n_classes = encode_labels(name, labels)
    else:
        labels, n_classes = _as_float32(name, "y", labels, ndim=1), 0
    dataset = Dataset(
        name=name,
        X=features,
        y=labels,
        task=task,
        n_classes=n_classes,
        train_idx=_as_index(train_idx),
        test_idx=_as_index(test_idx),
        relevant=_as_index(relevant),
        image_shape=None if image_shape is None else (int(image_shape[0]), int(image_shape[1])),
    )
    validate(dataset)
    return read_only(dataset)


def read_only(dataset: Dataset) -> Dataset:
    """Return a copy of ``dataset`` whose arrays are read-only views (no data is copied)."""
    frozen = {}
    for field in fields(dataset):
        value = getattr(dataset, field.name)
        if isinstance(value, np.ndarray):
            value = value.view()
            value.flags.writeable = False
            frozen[field.name] = value
    return replace(dataset, **frozen)
