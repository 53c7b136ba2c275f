"""A party's data view, built from the setup instructions and cached per process.

The view is a pure function of its instructions (dataset, columns, training rows, noise), so a
process-level cache is correct in every runtime: a miss only rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict

import numpy as np

from vflfs.datasets import PartyData, build_party_data, load_dataset

_CACHE: OrderedDict[str, PartyData] = OrderedDict()
_CACHE_SIZE = 8


def _key(data_spec: dict, train_rows: np.ndarray) -> str:
    h = hashlib.sha256(json.dumps(data_spec, sort_keys=True).encode())
    h.update(np.ascontiguousarray(train_rows, dtype=np.int64).tobytes())
    return h.hexdigest()


def party_data(data_spec: dict, train_rows: np.ndarray) -> PartyData:
    """The party's own columns (plus injected noise), min-max scaled on ``train_rows``."""
    key = _key(data_spec, train_rows)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    dataset = load_dataset(
        data_spec["name"], data_spec.get("data_dir"), **dict(data_spec.get("params") or {})
    )
    noise = data_spec.get("noise") or {}
    view = build_party_data(
        dataset.X,
        np.asarray(data_spec["columns"], dtype=np.int64),
        train_rows,
        noise_ratio=float(noise.get("ratio", 0.0)),
        noise_seed=int(noise.get("seed", 0)),
    )
    _CACHE[key] = view
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return view
