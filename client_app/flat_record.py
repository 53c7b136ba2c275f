"""Named arrays as one flat buffer: a Flower ``ArrayRecord`` of one ``Array``.

Flower's ``Array`` and ``ArrayRecord`` cost several microseconds of bookkeeping per array; a
party saves part of its state on every message, so a record of one array per tensor (a model's
weights and biases, the optimiser's moments of each) would cost more than the arrays' bytes.
A flat record holds one ``uint8`` array, ``flat``, whatever it packs: the length of a header,
the header (the arrays' names, dtypes and shapes as JSON, encoded once per layout and process,
padded to 8 bytes), then the arrays' bytes back to back.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np
from flwr.app import Array, ArrayRecord

FLAT = "flat"
_LENGTH = np.dtype("<u8")
_HEADERS: OrderedDict[tuple, bytes] = OrderedDict()  # layout -> length + header, newest last
_HEADERS_KEPT = 64


def pack(arrays: Mapping[str, np.ndarray]) -> ArrayRecord:
    """One record holding every array of ``arrays`` (a copy of their bytes)."""
    parts = [np.ascontiguousarray(a) for a in arrays.values()]
    layout = tuple((name, a.dtype.str, a.shape) for name, a in zip(arrays, parts, strict=True))
    data = b"".join([_header(layout), *parts])
    record = ArrayRecord()
    record[FLAT] = Array("uint8", (len(data),), "raw", data)
    return record


def unpack(record: ArrayRecord) -> dict[str, np.ndarray]:
    """The arrays of a record written by :func:`pack` (read-only views of its buffer)."""
    if FLAT not in record:
        raise ValueError(
            f"a party state record holds {sorted(record)}, not one flat buffer: it was written "
            "by an older vflfs; fix: start the run afresh (rerun=true)"
        )
    data = record[FLAT].data
    size = int(np.frombuffer(data, _LENGTH, 1)[0])
    offset = _LENGTH.itemsize + size
    out: dict[str, np.ndarray] = {}
    for name, dtype, shape in json.loads(data[_LENGTH.itemsize : offset]):
        dt, count = np.dtype(dtype), math.prod(shape)
        view = np.frombuffer(data, dt, count, offset) if count else np.zeros(0, dt)
        out[name] = view.reshape(shape)
        offset += count * dt.itemsize
    if offset != len(data):
        raise ValueError(f"a flat record of {len(data)} bytes whose layout covers {offset}")
    return out


def _header(layout: tuple) -> bytes:
    """The length and JSON of ``layout``, padded so that the arrays start 8-byte aligned."""
    header = _HEADERS.get(layout)
    if header is not None:
        _HEADERS.move_to_end(layout)
        return header
    text = json.dumps(layout).encode()
    text += b" " * (-len(text) % 8)
    header = np.array([len(text)], _LENGTH).tobytes() + text
    _HEADERS[layout] = header
    if len(_HEADERS) > _HEADERS_KEPT:
        _HEADERS.popitem(last=False)
    return header
