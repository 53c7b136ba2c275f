"""The wire format of the Paillier phases: integers as fixed-width big-endian bytes.

Ciphertexts travel as ``uint8`` arrays of shape ``shape + (nbytes,)`` with ``nbytes`` twice the
key's bytes (512 B at 2048 bits, spec section 4), never as JSON or ``phe`` objects; masked
plaintext integers travel the same way, signed where they may be negative.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from gmpy2 import mpz


def to_wire(
    values: Iterable[int], nbytes: int, shape: tuple[int, ...] | None = None, signed: bool = False
) -> np.ndarray:
    """``values`` (C order) as a ``uint8`` array of shape ``shape + (nbytes,)`` (default
    ``(count, nbytes)``)."""
    raw = b"".join(int(v).to_bytes(nbytes, "big", signed=signed) for v in values)
    out = np.frombuffer(raw, dtype=np.uint8).reshape(-1, nbytes)
    return out.reshape(*shape, nbytes) if shape is not None else out


def from_wire(array: np.ndarray, signed: bool = False) -> np.ndarray:
    """The integers of a ``uint8`` array (last axis: bytes), as Python ints of shape
    ``array.shape[:-1]``."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    flat = array.reshape(-1, array.shape[-1])
    out = np.empty(len(flat), dtype=object)
    out[:] = [int.from_bytes(row.tobytes(), "big", signed=signed) for row in flat]
    return out.reshape(array.shape[:-1])


def ciphertexts(array: np.ndarray) -> list[mpz]:
    """The ciphertexts of a ``uint8`` array, flattened in C order."""
    return [mpz(v) for v in from_wire(array).ravel()]


def int_bytes(value: int) -> np.ndarray:
    """A non-negative integer in as few bytes as it needs (at least one)."""
    value = int(value)
    return to_wire([value], max(1, (value.bit_length() + 7) // 8)).ravel()
