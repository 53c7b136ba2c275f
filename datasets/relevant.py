"""Known relevant columns given by the user, checked: ``results.json`` then scores the selection.

A dataset's ``relevant`` lists the columns known to carry the signal (ground truth of synthetic or
designed data); each run's ``results.json`` then reports the precision and recall of the
selected columns against it. Users give it as a config value:

* ``dataset=npz`` / ``dataset=csv``: ``dataset.params.relevant=[0,3,7]``, indices of X's columns
  (for a table: of its feature columns, in file order, the label and dropped columns not
  counted), or for a table the column names (``'[age,income]'``).
* ``dataset=party_files``: ``dataset.relevant=[[0,2],[],[5]]``, one list per party of indices of
  that party's feature columns (every column of its file but the ID column, in file order; an
  empty list for a party without relevant columns). Results count columns party after party:
  party m's column j is column ``j + (columns of parties 0..m-1)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vflfs.datasets.errors import DataError


def _fix(key: str) -> str:
    return f"fix: list the known relevant columns in {key}, or leave it unset (null)"


def relevant_indices(
    values: object,
    n_features: int,
    key: str = "dataset.params.relevant",
    names: Sequence[str] | None = None,
    allow_empty: bool = False,
) -> np.ndarray | None:
    """``values`` (None, or a list of column indices or, where ``names`` are given, of column
    names) as sorted int64 indices in ``0..n_features-1``; a DataError naming ``key`` otherwise."""
    if values is None:
        return None
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
        raise DataError(f"{key} must be a list of columns, got {values!r}; {_fix(key)}")
    items = list(values)
    if not items and not allow_empty:
        raise DataError(f"{key} is an empty list; {_fix(key)}")
    indices = [_index(item, n_features, key, names) for item in items]
    if len(set(indices)) != len(indices):
        dup = sorted({i for i in indices if indices.count(i) > 1})
        raise DataError(f"{key} names column(s) {dup} more than once; fix: give each column once")
    return np.asarray(sorted(indices), dtype=np.int64)


def _index(item: object, n_features: int, key: str, names: Sequence[str] | None) -> int:
    if isinstance(item, str):
        if names is None:
            raise DataError(
                f"{key}: {item!r} is a name, but this data has no column names; fix: give "
                "column indices (0-based)"
            )
        if item not in names:
            shown = list(names)[:20]
            raise DataError(
                f"{key}: no feature column is named {item!r}; fix: use names from {shown}"
                f"{' ...' if len(names) > 20 else ''} (the label and dropped columns are not "
                "features)"
            )
        return list(names).index(item)
    if isinstance(item, bool) or not isinstance(item, int | np.integer):
        raise DataError(
            f"{key}: {item!r} is not a column index; fix: give 0-based integer indices"
            f"{' or column names' if names is not None else ''}"
        )
    if not 0 <= int(item) < n_features:
        raise DataError(
            f"{key}: column {int(item)} is out of range 0..{n_features - 1} (the data has "
            f"{n_features} feature columns); fix: use 0-based indices of the feature columns"
        )
    return int(item)


def party_relevant(values: object, n_parties: int, key: str = "dataset.relevant") -> list | None:
    """Check the shape of party_files' ``dataset.relevant``: one list per party (or None)."""
    if values is None:
        return None
    ok = isinstance(values, Sequence) and not isinstance(values, str | bytes)
    ok = ok and len(values) == n_parties
    ok = ok and all(isinstance(v, Sequence) and not isinstance(v, str | bytes) for v in values)
    if not ok:
        raise DataError(
            f"{key} must hold one list of column indices per party ({n_parties} parties), got "
            f"{values!r}; fix: e.g. {key}=[[0,2]{',[]' * (n_parties - 1)}] (an empty list for "
            "a party without relevant columns)"
        )
    return [list(v) for v in values]


def global_relevant(per_party: list[list], n_features: Sequence[int], key: str) -> np.ndarray:
    """Per-party column indices (checked against each party's column count) as indices of the
    parties' columns laid side by side, party 0 first."""
    offsets = np.concatenate([[0], np.cumsum(n_features)[:-1]]).astype(np.int64)
    parts = [
        relevant_indices(cols, int(d), f"{key}[{m}]", allow_empty=True) + offsets[m]
        for m, (cols, d) in enumerate(zip(per_party, n_features, strict=True))
    ]
    merged = np.concatenate(parts).astype(np.int64)
    if merged.size == 0:
        raise DataError(f"{key} lists no column for any party; {_fix(key)}")
    return merged
