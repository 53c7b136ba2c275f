"""A party's data view, built from the setup instructions and cached per process.

The view is a pure function of its instructions (dataset, columns, training rows, noise), so a
process-level cache is correct in every runtime: a miss only rebuilds it. A party with its own
file (``party_file`` in the instructions: deployment) reads the aligned rows of that file,
memory-mapped from its cache, so that a fresh process per message loads it in milliseconds.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict

import numpy as np

from vflfs.datasets import PartyData, build_party_data, load_dataset
from vflfs.datasets.party_files import load_party_file

_CACHE: OrderedDict[str, PartyData] = OrderedDict()
_CACHE_SIZE = 8


def _key(data_spec: dict, train_rows: np.ndarray) -> str:
    h = hashlib.sha256(json.dumps(data_spec, sort_keys=True).encode())
    h.update(np.ascontiguousarray(train_rows, dtype=np.int64).tobytes())
    return h.hexdigest()


def party_data(data_spec: dict, train_rows: np.ndarray, keep: int = 1) -> PartyData:
    """The party's own columns (plus injected noise), scaled on ``train_rows``; the
    cache keeps the last ``max(8, keep)`` views (``keep``: the parties of the run, which in
    ``engine=local`` all live in this process)."""
    key = _key(data_spec, train_rows)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    X, columns = _features(data_spec)
    noise = data_spec.get("noise") or {}
    view = build_party_data(
        X,
        columns,
        train_rows,
        noise_ratio=float(noise.get("ratio", 0.0)),
        noise_seed=int(noise.get("seed", 0)),
        scaling=str(data_spec.get("scaling", "minmax")),
    )
    _CACHE[key] = view
    while len(_CACHE) > max(_CACHE_SIZE, keep):
        _CACHE.popitem(last=False)
    return view


def _features(data_spec: dict) -> tuple[np.ndarray, np.ndarray]:
    """The party's feature matrix (rows in the run's sample order) and its columns to use."""
    own = data_spec.get("party_file")
    if own is not None:
        table = load_party_file(own["path"], own["id_column"], own.get("cache_dir") or None)
        X = np.asarray(table.X[np.asarray(own["rows"], dtype=np.int64)])
        return X, np.arange(X.shape[1], dtype=np.int64)
    dataset = load_dataset(
        data_spec["name"], data_spec.get("data_dir"), **dict(data_spec.get("params") or {})
    )
    return dataset.X, np.asarray(data_spec["columns"], dtype=np.int64)
