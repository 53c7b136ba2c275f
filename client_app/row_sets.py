"""Row index sets in a compact form for ``context.state``: a bit mask per sorted run.

A party keeps the server's training and evaluation rows between messages, and every message
carries its whole ``context`` (protobuf in the local and deployment engines, pickle in
simulation). As int64 they cost 8 bytes per row: 7.6 MB, and 36 ms of protobuf per message,
at 10^6 rows. The server's splits are sorted (the evaluation rows are the validation rows,
then the test rows: two sorted runs), so each strictly increasing run is stored as a bit mask
over ``first .. last`` (``np.packbits``): one bit per row in the run's range, 1/64 of the
int64 form for a dense run. A run sparser than one row in 64 stays int64. The order of the
rows is kept exactly.

The packed form is a uint8 array: an int64 header ``[runs, (first, last, count, kind) x
runs]`` followed by each run's bytes. :func:`unpack_rows` also accepts the plain int64 form
(what party snapshots written before this module hold).
"""

from __future__ import annotations

import numpy as np

MASK, RAW = 0, 1
_FIELDS = 4  # first, last, count, kind


def runs(rows: np.ndarray) -> list[np.ndarray]:
    """``rows`` cut into its maximal strictly increasing runs."""
    if rows.size == 0:
        return []
    cuts = np.flatnonzero(np.diff(rows) <= 0) + 1
    return np.split(rows, cuts)


def pack_rows(rows: np.ndarray) -> np.ndarray:
    """``rows`` (int64 indices >= 0) in the packed uint8 form."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.ndim != 1 or (rows.size and rows.min() < 0):
        raise ValueError("row indices must be a 1-d array of non-negative integers")
    header, bodies = [len(runs(rows))], []
    for run in runs(rows):
        first, last = int(run[0]), int(run[-1])
        span = last - first + 1
        if (span + 7) // 8 <= 8 * run.size:
            mask = np.zeros(span, dtype=bool)
            mask[run - first] = True
            bodies.append(np.packbits(mask))
            kind = MASK
        else:
            bodies.append(run.view(np.uint8))
            kind = RAW
        header += [first, last, run.size, kind]
    head = np.asarray(header, dtype=np.int64).view(np.uint8)
    return np.concatenate([head, *bodies]) if bodies else head.copy()


def unpack_rows(packed: np.ndarray) -> np.ndarray:
    """The int64 row indices of :func:`pack_rows`'s form (or of the plain int64 form)."""
    packed = np.asarray(packed)
    if packed.dtype != np.uint8:
        return packed.astype(np.int64, copy=False)
    n = int(packed[:8].view(np.int64)[0])
    header = packed[8 : 8 * (1 + _FIELDS * n)].view(np.int64).reshape(n, _FIELDS)
    offset, out = 8 * (1 + _FIELDS * n), []
    for first, last, count, kind in header.tolist():
        if kind == MASK:
            span = last - first + 1
            size = (span + 7) // 8
            mask = np.unpackbits(packed[offset : offset + size], count=span).astype(bool)
            out.append(np.flatnonzero(mask).astype(np.int64) + first)
        else:
            size = 8 * count
            out.append(packed[offset : offset + size].copy().view(np.int64))
        offset += size
    return np.concatenate(out) if out else np.zeros(0, np.int64)
