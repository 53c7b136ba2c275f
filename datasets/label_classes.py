"""The classes of a labels file: declared or inferred, counted, and checked by their raw values.

A stray value (three rows of ``2`` in a binary task, a typo, a sentinel such as ``-1``) would
silently add a class. So every class is either declared (``dataset.classes=[ham,spam]``: any
other value is an error) or inferred from the file and logged with its count, and an inferred
class with fewer rows than ``dataset.min_class_count`` is an error naming its raw value.

The default threshold is ``max(10, 0.1% of the rows)``: a class of fewer than 10 rows leaves the
20% test and validation splits about one row of it each, too few to learn or score it; and in a
large file a class of under 0.1% of the rows is far more often a stray code than a real class.
A real rare class is declared, which lifts the threshold for it.

Values compare as text, with integral floats written as integers (``1.0`` is ``1``), so that
``dataset.classes=[0,1]`` matches a column pandas read as floats.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vflfs.datasets.errors import DataError

log = logging.getLogger("vflfs")

MIN_ROWS = 10
MIN_SHARE = 0.001


def label_text(value: object) -> str:
    """A label value as text: ``1.0`` -> ``1``, ``'spam'`` -> ``spam``."""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def fractional(values: np.ndarray) -> np.ndarray:
    """The distinct non-integral numbers among ``values``, in the order they first appear
    (empty unless they are floats): labels that read as a continuous target, not classes."""
    if not np.issubdtype(values.dtype, np.floating):
        return values[:0]
    return np.asarray(list(dict.fromkeys(values[np.mod(values, 1) != 0].tolist())))


def default_min_count(n_rows: int) -> int:
    """``max(10, ceil(0.1% of n_rows))``."""
    return max(MIN_ROWS, math.ceil(MIN_SHARE * n_rows))


@dataclass(frozen=True)
class LabelClasses:
    """Class ids (0..c-1, in the declared order or sorted by value) and the class names."""

    y: np.ndarray
    names: list[str]
    counts: list[int]


def check_classes(
    where: str,
    values: np.ndarray,
    declared: Sequence[object] | None = None,
    min_count: int | None = None,
) -> LabelClasses:
    """Encode the labels ``values`` of ``where`` (a file name) into class ids, checked."""
    values = np.asarray(values).reshape(-1)
    import pandas as pd  # on use: a party's process never imports it

    missing = int(np.count_nonzero(pd.isna(values)))
    if missing:
        raise DataError(
            f"{missing} row(s) of {where} have no label; fix: drop the unlabelled rows or fill "
            "in their labels"
        )
    continuous = fractional(values)
    if continuous.size:
        raise DataError(
            f"the labels of {where} hold fractional numbers (e.g. {continuous[0]:g}), a "
            "continuous target rather than classes; fix: dataset.task=regression for a "
            "continuous target, or recode the labels as classes"
        )
    text = np.asarray([label_text(v) for v in values.tolist()])
    found, counts = np.unique(text, return_counts=True)
    count = dict(zip(found.tolist(), counts.tolist(), strict=True))
    if declared is None:
        names = _inferred(where, values, count)
        _check_counts(where, len(text), count, min_count)
    else:
        names = _declared(where, count, declared)
    summary = ", ".join(f"{name}: {count[name]}" for name in names)
    log.info(
        "%s: %d classes %s (rows per class: %s)",
        where,
        len(names),
        "declared" if declared is not None else "inferred",
        summary,
    )
    index = {name: i for i, name in enumerate(names)}
    y = np.asarray([index[t] for t in text.tolist()], dtype=np.int64)
    return LabelClasses(y=y, names=names, counts=[count[name] for name in names])


def _inferred(where: str, values: np.ndarray, count: dict[str, int]) -> list[str]:
    """The classes found, in the order of their values (numbers numerically)."""
    try:
        ordered = np.unique(values)
    except TypeError as exc:
        raise DataError(
            f"the labels of {where} mix numbers and text ({exc}); fix: give every label the "
            "same type, or declare the classes with dataset.classes=[...]"
        ) from exc
    names = list(dict.fromkeys(label_text(v) for v in ordered.tolist()))
    assert set(names) == set(count)
    return names


def _check_counts(where: str, n_rows: int, count: dict[str, int], min_count: int | None) -> None:
    threshold = default_min_count(n_rows) if min_count is None else int(min_count)
    rare = sorted((c, name) for name, c in count.items() if c < threshold)
    if not rare:
        return
    c, name = rare[0]
    others = "" if len(rare) == 1 else f" (and {len(rare) - 1} more rare value(s))"
    found = ", ".join(f"{k}: {v}" for k, v in count.items())
    raise DataError(
        f"label value {name!r} appears in {c} row(s) of {where}{others}; a class needs at least "
        f"{threshold} rows (dataset.min_class_count; classes found: {found}); fix: declare the "
        "classes with dataset.classes=[...] (a declared class may be rare; any other value is "
        "an error), or clean the file"
    )


def _declared(where: str, count: dict[str, int], declared: Sequence[object]) -> list[str]:
    names = [label_text(c) for c in declared]
    if len(set(names)) != len(names) or len(names) < 2:
        raise DataError(
            f"dataset.classes={names} must list at least two distinct classes; fix: list each "
            "class once"
        )
    unknown = sorted((n, v) for v, n in count.items() if v not in set(names))
    if unknown:
        n, value = unknown[-1]
        raise DataError(
            f"label value {value!r} appears in {n} row(s) of {where} but is not among "
            f"dataset.classes={names} ({len(unknown)} undeclared value(s)); fix: clean the "
            "file, or add the value to dataset.classes"
        )
    absent = [name for name in names if name not in count]
    if absent:
        raise DataError(
            f"declared class(es) {absent} appear in no row of {where}; fix: remove them from "
            "dataset.classes, or check how the file writes them"
        )
    for name in names:
        if count[name] < MIN_ROWS:
            log.warning("%s: declared class %r has only %d row(s)", where, name, count[name])
    return names
