"""Plain Python payloads <-> Flower ``RecordDict``.

The protocol's messages (:mod:`vflfs.protocol`) travel as payloads: flat dicts whose values are
numpy arrays, lists of numpy arrays, or config scalars (int, float, str, bytes, bool and lists of
these). This module is the only place that turns them into Flower records and back.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from vflfs.protocol.body import Payload
from vflfs.protocol.failure import Failure

ARRAYS = "arrays"
CONFIG = "config"
ERROR = "error"
_LIST_SEP = "#"


def to_array(x: np.ndarray) -> Array:
    """A Flower ``Array`` holding ``x``'s raw bytes (no ``np.save`` header or copy of it)."""
    x = np.ascontiguousarray(x)
    return Array(_dtype_name(x.dtype), tuple(int(n) for n in x.shape), "raw", x.tobytes())


@functools.cache
def _dtype_name(dtype: np.dtype) -> str:
    """``str(dtype)``, which numpy builds in Python on every call (a tenth of a message's
    encoding)."""
    return str(dtype)


def from_array(a: Array) -> np.ndarray:
    """The numpy array in ``a`` (read-only view for raw arrays)."""
    if a.stype != "raw":
        return a.numpy()
    return np.frombuffer(a.data, dtype=np.dtype(a.dtype)).reshape(a.shape)


def _is_array_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and any(isinstance(v, np.ndarray) for v in value)


def encode(payload: Payload) -> RecordDict:
    """Encode a payload as a RecordDict (arrays as raw bytes, the rest as config)."""
    arrays: dict[str, Array] = {}
    config: dict[str, Any] = {}
    for key, value in payload.items():
        if _LIST_SEP in key:
            raise ValueError(f"payload key {key!r} must not contain {_LIST_SEP!r}")
        if isinstance(value, np.ndarray):
            arrays[key] = to_array(value)
        elif _is_array_list(value):
            config[f"{key}{_LIST_SEP}len"] = len(value)
            for i, item in enumerate(value):
                arrays[f"{key}{_LIST_SEP}{i}"] = to_array(np.asarray(item))
        elif value is not None:
            config[key] = value
    records = RecordDict()
    if arrays:
        records[ARRAYS] = ArrayRecord(arrays)
    if config:
        records[CONFIG] = ConfigRecord(config)
    return records


def decode(records: RecordDict) -> Payload:
    """Decode a RecordDict written by :func:`encode`."""
    payload: Payload = {}
    config = dict(records[CONFIG]) if CONFIG in records else {}
    arrays = records.get(ARRAYS, {})
    lists: dict[str, list] = {}
    for key, value in config.items():
        if key.endswith(f"{_LIST_SEP}len"):
            lists[key[: -len(_LIST_SEP) - 3]] = [None] * int(value)
        else:
            payload[key] = value
    for key, array in arrays.items():
        name, sep, index = key.partition(_LIST_SEP)
        if sep:
            lists[name][int(index)] = from_array(array)
        else:
            payload[key] = from_array(array)
    payload.update(lists)
    return payload


def encode_error(failure: Failure) -> RecordDict:
    """The reply a party sends when an operation fails (what the party lets the server see;
    :mod:`vflfs.client_app.errors`)."""
    return RecordDict({ERROR: ConfigRecord(failure.to_payload())})


def decode_error(records: RecordDict) -> Failure | None:
    """The failure a party reported, or ``None``."""
    if ERROR not in records:
        return None
    return Failure.from_payload({k: str(v) for k, v in records[ERROR].items()})
