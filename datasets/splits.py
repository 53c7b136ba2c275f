"""Column splits: which columns of one dataset each simulated party holds.

Parties are numbered from 0, like Flower's ``partition-id``. Every split returns one sorted
(except ``columns``, which keeps the given order) int64 index array per party.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from vflfs.datasets.errors import DataError

SPLIT_KINDS = ("even", "random", "sizes", "columns", "image-rows")


def split_columns(
    n_features: int,
    n_parties: int,
    kind: str = "even",
    seed: int = 0,
    sizes: Sequence[int] | None = None,
    columns: Sequence[Sequence[int]] | None = None,
    image_shape: tuple[int, int] | None = None,
) -> list[np.ndarray]:
    """Cut ``n_features`` columns into ``n_parties`` index arrays.

    Kinds: ``even`` (contiguous blocks, sizes differ by at most 1), ``random`` (seeded
    permutation then equal blocks, each sorted), ``sizes`` (contiguous blocks of the given
    counts), ``columns`` (explicit index lists covering every column once), ``image-rows``
    (horizontal bands of an H x W image; flat index = row * W + col).
    """
    n_features = _count("n_features", n_features)
    n_parties = _count("n_parties", n_parties)
    everything = np.arange(n_features, dtype=np.int64)
    if kind == "even":
        parts = np.array_split(everything, n_parties)
    elif kind == "random":
        shuffled = np.random.default_rng(seed).permutation(everything)
        parts = [np.sort(p) for p in np.array_split(shuffled, n_parties)]
    elif kind == "sizes":
        parts = _by_sizes(n_features, n_parties, sizes)
    elif kind == "columns":
        parts = _by_columns(n_features, n_parties, columns)
    elif kind == "image-rows":
        parts = _by_image_rows(n_features, n_parties, image_shape)
    else:
        raise DataError(f"unknown column split kind {kind!r}; fix: use one of {list(SPLIT_KINDS)}")
    for party, part in enumerate(parts):
        if part.size == 0:
            raise DataError(
                f"party {party} has no columns: kind {kind!r} gives {n_parties} parties "
                f"{n_features} columns; fix: use fewer parties or give every party a column"
            )
    return [np.asarray(p, dtype=np.int64) for p in parts]


def _count(what: str, value: int) -> int:
    try:
        number = operator.index(value)
    except TypeError as exc:
        raise DataError(
            f"{what} must be an integer, got {value!r}; fix: pass a whole number"
        ) from exc
    if number < 1:
        raise DataError(f"{what} must be at least 1, got {number}; fix: use a positive count")
    return number


def _preview(values: Sequence[int] | np.ndarray, limit: int = 10) -> str:
    items = [int(v) for v in values]
    more = f" ... ({len(items)} in all)" if len(items) > limit else ""
    return f"{items[:limit]}{more}"


def _by_sizes(n_features: int, n_parties: int, sizes: Sequence[int] | None) -> list[np.ndarray]:
    if sizes is None or len(sizes) != n_parties:
        got = "none" if sizes is None else f"{len(sizes)}"
        raise DataError(
            f"kind 'sizes' needs sizes=[...] with one count per party ({n_parties}), got {got}"
        )
    counts = [operator.index(s) for s in sizes]
    if any(c < 0 for c in counts):
        raise DataError(f"sizes {counts} contain a negative count; fix: use counts >= 1")
    if sum(counts) != n_features:
        raise DataError(
            f"sizes {counts} add up to {sum(counts)} but the data has {n_features} columns "
            f"(expected sum {n_features}); fix: make the sizes add up to {n_features}"
        )
    return np.split(np.arange(n_features, dtype=np.int64), np.cumsum(counts)[:-1])


def _by_columns(
    n_features: int, n_parties: int, columns: Sequence[Sequence[int]] | None
) -> list[np.ndarray]:
    if columns is None or len(columns) != n_parties:
        got = "none" if columns is None else f"{len(columns)} lists"
        raise DataError(
            f"kind 'columns' needs columns=[[...], ...] with one index list per party "
            f"({n_parties}), got {got}"
        )
    parts = [_index_list(party, c) for party, c in enumerate(columns)]
    joined = np.concatenate(parts) if parts else np.empty(0, np.int64)
    out_of_range = joined[(joined < 0) | (joined >= n_features)]
    if out_of_range.size:
        raise DataError(
            f"columns {_preview(out_of_range)} are out of range 0..{n_features - 1}; "
            "fix: use column indices of the data"
        )
    values, counts = np.unique(joined, return_counts=True)
    duplicated = values[counts > 1]
    if duplicated.size:
        first = int(duplicated[0])
        owners = [p for p, part in enumerate(parts) if first in part]
        raise DataError(
            f"columns {_preview(duplicated)} are given more than once (column {first} to "
            f"parties {owners}); fix: give every column to exactly one party"
        )
    missing = np.setdiff1d(np.arange(n_features), values)
    if missing.size:
        raise DataError(
            f"columns {_preview(missing)} are missing (given to no party); fix: give every "
            "column to exactly one party"
        )
    return parts


def _index_list(party: int, values: Sequence[int]) -> np.ndarray:
    array = np.asarray(values).reshape(-1)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise DataError(
            f"columns of party {party} must be integer indices, got {array[:5].tolist()}; "
            "fix: list column numbers"
        )
    return array.astype(np.int64)


def _by_image_rows(
    n_features: int, n_parties: int, image_shape: tuple[int, int] | None
) -> list[np.ndarray]:
    if image_shape is None:
        raise DataError(
            "kind 'image-rows' needs image_shape=(height, width) (e.g. dataset.image_shape, "
            "(32, 32) for coil20); fix: pass image_shape or use another split kind"
        )
    height, width = (operator.index(v) for v in image_shape)
    if height * width != n_features:
        raise DataError(
            f"image_shape {(height, width)} has {height * width} pixels but the data has "
            f"{n_features} columns; fix: give the true (height, width) of the images"
        )
    bands = np.array_split(np.arange(height, dtype=np.int64), n_parties)
    return [(rows[:, None] * width + np.arange(width)).reshape(-1) for rows in bands]
