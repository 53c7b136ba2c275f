"""Named arrays as one flat buffer: a Flower ``ArrayRecord`` of one ``Array``.

Flower's ``Array`` and ``ArrayRecord`` cost several microseconds of bookkeeping per array; a
party saves part of its state on every message, so a record of one array per tensor (a model's
weights and biases, the optimiser's moments of each) would cost more than the arrays' bytes.
A flat record holds one ``uint8`` array, ``flat``, whatever it packs: the length of a header,
the header (each array's name, dtype, shape and byte offset as JSON, encoded once per layout and
process, padded to 8 bytes), then the arrays' bytes. Arrays already laid out in one buffer (a
:class:`Buffer`, e.g. a model's parameters kept in one tensor: :mod:`vflfs.ml.flat_state`) are
written with one copy.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from itertools import accumulate

import numpy as np
from flwr.app import Array, ArrayRecord

FLAT = "flat"
_LENGTH = np.dtype("<u8")
_HEADERS: OrderedDict[tuple, bytes] = OrderedDict()  # layout -> length + header, newest last
_HEADERS_KEPT = 64

Layout = tuple[tuple[str, str, tuple[int, ...], int], ...]  # name, dtype, shape, byte offset


class Buffer(Mapping[str, np.ndarray]):
    """Named arrays placed in one 1-D buffer as ``layout`` says (views of it)."""

    def __init__(self, layout: Layout, data: np.ndarray) -> None:
        self.layout, self.data = layout, data
        self._where = {entry[0]: entry for entry in layout}

    def __getitem__(self, name: str) -> np.ndarray:
        _, dtype, shape, offset = self._where[name]
        dt, count = np.dtype(dtype), math.prod(shape)
        raw = self.data.view(np.uint8).reshape(-1)[offset : offset + count * dt.itemsize]
        return raw.view(dt).reshape(shape)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


def pack(arrays: Mapping[str, np.ndarray], into: ArrayRecord | None = None) -> ArrayRecord:
    """One record holding every array of ``arrays`` (a copy of their bytes): ``into`` when it
    is a flat record (its buffer replaced in place: Flower's ``Array`` costs more to make than
    to refill), else a new one."""
    if isinstance(arrays, Buffer):
        layout, parts = arrays.layout, [np.ascontiguousarray(arrays.data)]
    else:
        parts = [np.ascontiguousarray(a) for a in arrays.values()]
        offsets = accumulate((a.nbytes for a in parts), initial=0)
        layout = tuple(
            (name, a.dtype.str, a.shape, offset)
            for name, a, offset in zip(arrays, parts, offsets, strict=False)
        )
    data = b"".join([_header(layout), *parts])
    flat = into.get(FLAT) if into is not None and len(into) == 1 else None
    if flat is not None and flat.stype == "raw" and flat.dtype == "uint8":
        if flat.shape != (len(data),):
            flat.shape = (len(data),)
        flat.data = data
        return into
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
    start = _LENGTH.itemsize + int(np.frombuffer(data, _LENGTH, 1)[0])
    out: dict[str, np.ndarray] = {}
    for name, dtype, shape, offset in json.loads(data[_LENGTH.itemsize : start]):
        dt, count = np.dtype(dtype), math.prod(shape)
        if start + offset + count * dt.itemsize > len(data):
            raise ValueError(f"a flat record of {len(data)} bytes too short for {name!r}")
        view = np.frombuffer(data, dt, count, start + offset) if count else np.zeros(0, dt)
        out[name] = view.reshape(shape)
    return out


def _header(layout: Layout) -> bytes:
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
