"""Slots: several integers in one plaintext, ``sum_j v_j 2^(width j)``.

A plaintext mod n holds ``slots_per_plaintext`` slots of ``width`` bits. A value in a slot is
what it is only while every slot stays in ``[0, 2^width)``: the callers size ``width`` so that
a masked value (value + statistical mask, + a public offset for signed values) never carries
into the next slot. Packing works on plaintexts (:func:`pack_plain`, :func:`pack_columns`) and
homomorphically on ciphertexts (:func:`pack`, Horner's rule: ``width`` squarings per slot).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gmpy2 import mpz

from .multiexp import square


def slots_per_plaintext(key_bits: int, width: int) -> int:
    """How many ``width``-bit slots fit below n (n has ``key_bits`` bits, so n >= 2^(bits-1))."""
    count = (key_bits - 1) // width
    if count < 1:
        raise ValueError(f"a {width}-bit slot does not fit a {key_bits}-bit key")
    return count


def pack_plain(values: Sequence[int], width: int, offset: int = 0) -> int:
    """``sum_j (values[j] + offset) 2^(width j)``, an exact integer sum (signed values too)."""
    out = 0
    for v in reversed(values):
        out = (out << width) + int(v) + offset
    return out


def unpack_plain(m: int, count: int, width: int, offset: int = 0) -> list[int]:
    """The first ``count`` slots of a plaintext whose slots all lie in ``[0, 2^width)``, minus
    ``offset``."""
    mask, m = (1 << width) - 1, int(m)
    return [((m >> (width * j)) & mask) - offset for j in range(count)]


def pack_columns(ints: np.ndarray, slots: int, width: int, offset: int = 0) -> np.ndarray:
    """``R x C`` integers as ``ceil(R / slots) x C`` plaintexts: row ``b slots + t`` in slot t of
    block b (plus ``offset``)."""
    ints = np.asarray(ints, dtype=object)
    rows, cols = ints.shape
    out = np.zeros((-(-rows // slots), cols), dtype=object)
    for b in range(out.shape[0]):
        part = ints[b * slots : (b + 1) * slots]
        for c in range(cols):
            out[b, c] = pack_plain(part[:, c].tolist(), width, offset)
    return out


def unpack_columns(
    packed: np.ndarray, rows: int, slots: int, width: int, offset: int = 0
) -> np.ndarray:
    """The first ``rows`` rows of :func:`pack_columns`' plaintexts, ``offset`` removed."""
    packed = np.asarray(packed, dtype=object)
    out = np.zeros((rows, packed.shape[1]), dtype=object)
    for b in range(packed.shape[0]):
        count = min(slots, rows - b * slots)
        for c in range(packed.shape[1]):
            out[b * slots : b * slots + count, c] = unpack_plain(packed[b, c], count, width, offset)
    return out


def pack(key, cts: Sequence[mpz], width: int) -> mpz:
    """Enc(sum_j m_j 2^(width j)) from Enc(m_j), by Horner's rule (width squarings per slot)."""
    n2, acc = key.n2, cts[-1]
    for c in reversed(cts[:-1]):
        acc = square(acc, width, n2) * c % n2
    return acc
