"""The multi-exponentiation of every homomorphic linear map: ``prod_j c_j^(a_jk)`` for all k.

Straus' simultaneous method (Straus 1964; Moeller 2001 for windows): the exponents of a ``J x K``
matrix of signed integers are cut into digits, most significant first; each output squares its
accumulator once per bit (squarings shared by all J bases) and multiplies in the digits'
powers ``c_j^d`` at their positions. Three ways, by cost (:func:`choose`):

- ``naf`` (many outputs over few bases, e.g. the secure layer's ``[[G]] W^T``): width-w
  non-adjacent form (wNAF: odd signed digits ``|d| < 2^(w-1)``, at most one in any w
  consecutive bits, ~``bits / (w + 1)`` per exponent); tables of the odd powers of each base and
  of its inverse, once per base; one multiplication per non-zero digit;
- ``fixed``: w-bit windows of the magnitude (``1 - 2^-w`` of them non-zero); tables of ``c_j^d``
  for every ``d < 2^w`` (cheaper tables, more digits: for few outputs);
- ``buckets`` (one output over many bases, e.g. the F-statistic's class sums over every row):
  per window, the bases multiplied into the bucket of their digit, then ``sum_d d bucket_d`` by
  running products (Pippenger's trick): ``J + 2^(w+1)`` multiplications per window, no tables.

Negative exponents (and negative wNAF digits) use the inverses of their bases (one modular
inversion for all of them, Montgomery's batch inversion). Squarings are plain products (at
4096-bit moduli cheaper than ``powmod``'s set-up for a few squarings). The result is the unique
residue mod n^2, so every method gives the same ciphertexts bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gmpy2
import numpy as np
from gmpy2 import mpz

ONE = mpz(1)
WINDOWS = range(1, 9)  # window widths considered (wNAF: from 2)
METHODS = ("naf", "fixed", "buckets")

Step = tuple[int, tuple[tuple[int, int], ...]]  # (bit position, ((base, digit), ...))


@dataclass(frozen=True)
class Plan:
    """The digits of a ``J x K`` matrix of signed exponents, cut once for any bases.

    ``columns[k]``: output k's steps ``(position, ((base, digit), ...))``, most significant
    position first; base ``2 j`` is ``c_j``, ``2 j + 1`` its inverse; digits are positive."""

    window: int
    method: str
    inverse: tuple[bool, ...]  # per base j: does some digit need c_j^-1
    columns: tuple[tuple[Step, ...], ...]

    @classmethod
    def of(
        cls,
        exponents: np.ndarray | Sequence[Sequence[int]],
        buckets: bool | None = None,
        method: str | None = None,
        window: int | None = None,
    ) -> Plan:
        """The plan of a ``J x K`` matrix; ``method`` (or ``buckets``: buckets or a table
        method) and ``window`` force those, else the cheapest by :func:`choose`."""
        matrix = np.asarray(exponents, dtype=object).reshape(np.shape(exponents))
        rows, cols = matrix.shape
        small = _int64(matrix)  # every digit at once in int64 where the exponents allow
        ints = matrix if small is None else small
        top = int(np.abs(ints).max(initial=0))
        used = int(np.any(ints != 0, axis=1).sum())
        only = method or {True: "buckets", False: "tables", None: None}[buckets]
        sides = 2 if bool((ints < 0).any()) else 1
        chosen, method = choose(used, cols, max(top.bit_length(), 1), only, sides, window)
        window = window or chosen
        if small is None:
            found = _digits_of_ints([[int(v) for v in row] for row in matrix], window, method)
        else:
            found = _digits(small, window, method)
        columns, inverse = _columns(*found, rows, cols)
        return cls(window, method, tuple(inverse), columns)

    @property
    def buckets(self) -> bool:
        return self.method == "buckets"

    @property
    def used(self) -> set[int]:
        return {base for col in self.columns for _, ds in col for base, _ in ds}

    def run(self, key, bases: Sequence[mpz], columns: Sequence[int] | None = None) -> list[mpz]:
        """``prod_j bases[j]^(a_jk)`` mod n^2 of ``key`` for each output k of ``columns``
        (default: all)."""
        n2 = key.n2
        extended = _with_inverses(n2, bases, self.inverse)
        picked = range(len(self.columns)) if columns is None else columns
        if self.buckets:
            return [_run(n2, self.columns[k], _bucket_product(n2, extended)) for k in picked]
        tables = _tables(n2, extended, self.window, self.used, odd=self.method == "naf")
        return [_run(n2, self.columns[k], _table_product(n2, tables)) for k in picked]


def _int64(matrix: np.ndarray) -> np.ndarray | None:
    """The matrix as int64 when every entry is below 2^62 in magnitude, else None."""
    try:
        out = matrix.astype(np.int64)
    except OverflowError:
        return None
    return out if np.abs(out).max(initial=0) < 1 << 62 else None


def _digits(values: np.ndarray, w: int, method: str) -> tuple[np.ndarray, ...]:
    """The non-zero signed digits of an int64 matrix (``|a| < 2^62``): arrays of row j,
    column k, bit position and digit (its sign the exponent's times the wNAF digit's)."""
    a, sign = np.abs(values), np.where(values < 0, -1, 1)
    found, pos, full, half = [], 0, 1 << w, 1 << (w - 1)
    while a.any():
        if method == "naf":  # one bit per pass: odd a gives the digit a mods 2^w
            d = np.where(a & 1, a & (full - 1), 0)
            d = np.where(d >= half, d - full, d)
            a, step = (a - d) >> 1, 1
        else:
            d, a, step = a & (full - 1), a >> w, w
        j, k = np.nonzero(d)
        if j.size:
            found.append((j, k, np.full(j.size, pos), (d * sign)[j, k]))
        pos += step
    if not found:
        return tuple(np.zeros(0, np.int64) for _ in range(4))
    return tuple(np.concatenate(parts) for parts in zip(*found, strict=True))


def _digits_of_ints(values: list[list[int]], w: int, method: str) -> tuple[np.ndarray, ...]:
    """:func:`_digits` for Python integers of any size."""
    digits = _naf if method == "naf" else _windows
    found = [
        (j, k, pos, d if v > 0 else -d)
        for j, row in enumerate(values)
        for k, v in enumerate(row)
        for pos, d in digits(abs(v), w)
    ]
    return tuple(np.array(c, dtype=object) for c in zip(*found, strict=True)) or tuple(
        np.zeros(0, np.int64) for _ in range(4)
    )


def _columns(j, k, pos, digit, rows: int, cols: int) -> tuple[tuple, tuple[bool, ...]]:
    """Per output, its steps ``(position, ((base, |digit|), ...))`` by falling position (base
    ``2 j`` for a positive digit, ``2 j + 1`` for a negative one); which bases need inverses."""
    negative = np.asarray(digit < 0, dtype=bool)
    inverse = np.zeros(rows, dtype=bool)
    inverse[np.asarray(j[negative], dtype=np.int64)] = True
    order = np.lexsort((-np.asarray(pos, dtype=np.int64), np.asarray(k, dtype=np.int64)))
    bases, magnitudes = (2 * j + negative)[order].tolist(), np.abs(digit)[order].tolist()
    pairs = list(zip(bases, magnitudes, strict=True))
    ks, ps = np.asarray(k, dtype=np.int64)[order], np.asarray(pos, dtype=np.int64)[order]
    cut = np.flatnonzero((np.diff(ks) != 0) | (np.diff(ps) != 0)) + 1  # new (k, position)
    starts, ends = [0, *cut.tolist()], [*cut.tolist(), len(pairs)]
    columns: list[list] = [[] for _ in range(cols)]
    if not pairs:
        return tuple(() for _ in range(cols)), tuple(bool(v) for v in inverse)
    for a, b, kk, p in zip(starts, ends, ks[starts].tolist(), ps[starts].tolist(), strict=True):
        columns[kk].append((p, tuple(pairs[a:b])))
    return tuple(tuple(c) for c in columns), tuple(bool(v) for v in inverse)


def _naf(a: int, w: int) -> list[tuple[int, int]]:
    """The non-zero digits ``(position, d)`` of the width-w NAF of ``a >= 0``: ``a = sum d
    2^position``, d odd with ``|d| < 2^(w-1)``."""
    out, pos, full, half = [], 0, 1 << w, 1 << (w - 1)
    while a:
        zeros = (a & -a).bit_length() - 1
        a, pos = a >> zeros, pos + zeros
        d = a & (full - 1)
        if d >= half:
            d -= full
        out.append((pos, d))
        a, pos = (a - d) >> w, pos + w
    return out


def _windows(a: int, w: int) -> list[tuple[int, int]]:
    """The non-zero w-bit windows ``(position, d)`` of ``a >= 0``."""
    out, pos, mask = [], 0, (1 << w) - 1
    while a:
        if a & mask:
            out.append((pos, a & mask))
        a, pos = a >> w, pos + w
    return out


def square(c: mpz, times: int, n2: mpz) -> mpz:
    """``c^(2^times) mod n2`` by plain squarings."""
    for _ in range(times):
        c = c * c % n2
    return c


def _run(n2: mpz, column: Sequence[Step], product) -> mpz:
    """One output: squarings between the digit positions, ``product(digits)`` at each."""
    acc, last = None, 0
    for pos, digits in column:
        if acc is not None:
            acc = square(acc, last - pos, n2)
        part = product(digits)
        acc = part if acc is None else acc * part % n2
        last = pos
    return ONE if acc is None else square(acc, last, n2)


def _table_product(n2: mpz, tables: dict):
    def product(digits) -> mpz:
        (base, d), *rest = digits
        acc = tables[base][d]
        for base, d in rest:
            acc = acc * tables[base][d] % n2
        return acc

    return product


def _bucket_product(n2: mpz, extended: list):
    def product(digits) -> mpz:
        buckets: dict[int, mpz] = {}
        for base, d in digits:
            b = buckets.get(d)
            buckets[d] = extended[base] if b is None else b * extended[base] % n2
        running, total = None, None
        for d in range(max(buckets), 0, -1):
            b = buckets.get(d)
            if b is not None:
                running = b if running is None else running * b % n2
            if running is not None:
                total = running if total is None else total * running % n2
        return total

    return product


def choose(
    bases: int,
    outputs: int,
    bits: int,
    only: str | None = None,
    sides: int = 2,
    window: int | None = None,
) -> tuple[int, str]:
    """The window width and method (``only``: that method, or ``tables``: naf or fixed) with
    the fewest multiplications (the squarings are about the same); ``sides``: 2 where some
    exponents are negative (``fixed`` then tables the inverses too; ``naf`` always does)."""
    best = None
    for w in WINDOWS if window is None else (window,):
        windows = -(-bits // w)
        density = 1 - 2.0**-w  # a w-bit window is non-zero with this probability
        costs = {
            "fixed": bases * sides * ((1 << w) - 2) + outputs * windows * bases * density,
            "buckets": outputs * windows * (bases * density + 2 * ((1 << w) - 1)),
        }
        if w >= 2:  # odd powers of c and c^-1, batch inversion; ~bits / (w + 1) digits
            costs["naf"] = bases * ((1 << w) / 2 + 3) + outputs * bases * (bits + 1) / (w + 1)
        for method, cost in costs.items():
            if only not in (None, method) and not (only == "tables" and method != "buckets"):
                continue
            if best is None or cost < best[0]:
                best = (cost, w, method)
    return best[1], best[2]


def _with_inverses(n2: mpz, bases: Sequence[mpz], inverse: Sequence[bool]) -> list:
    """``[c_0, c_0^-1, c_1, c_1^-1, ...]`` (None where no inverse is needed): one inversion for
    all (Montgomery's trick: prefix products, invert the last, walk back)."""
    out: list = []
    for c in bases:
        out += [c, None]
    wanted = [j for j, flag in enumerate(inverse) if flag]
    if not wanted:
        return out
    prefix = [ONE]
    for j in wanted:
        prefix.append(prefix[-1] * bases[j] % n2)
    inv = gmpy2.invert(prefix[-1], n2)
    for i in range(len(wanted) - 1, -1, -1):
        j = wanted[i]
        out[2 * j + 1] = inv * prefix[i] % n2
        inv = inv * bases[j] % n2
    return out


def _tables(n2: mpz, extended: list, window: int, used: set[int], odd: bool) -> dict[int, list]:
    """``c^d`` for ``d < 2^window`` (``odd``: the odd ``d < 2^(window-1)``, at their index), for
    every base (and inverse) some digit uses."""
    out = {}
    for i in used:
        c = extended[i]
        if odd:
            row, step = [None, c], c * c % n2
            for _ in range(3, 1 << (window - 1), 2):
                row += [None, row[-1] * step % n2]
        else:
            row = [ONE, c]
            for _ in range(2, 1 << window):
                row.append(row[-1] * c % n2)
        out[i] = row
    return out


def multi_exp(key, bases: Sequence[mpz], exponents) -> list[mpz]:
    """Enc(sum_j exponents[j, k] m_j) = ``prod_j bases[j]^(exponents[j, k])`` mod n^2 for every
    column k of a ``J x K`` matrix of signed integers."""
    return Plan.of(exponents).run(key, bases)


def power_product(key, bases: Sequence[mpz], exponents: Sequence[int]) -> mpz:
    """Enc(sum_j exponents[j] m_j): one output of :func:`multi_exp`."""
    column = np.empty((len(bases), 1), dtype=object)
    column[:, 0] = [int(e) for e in exponents]
    return multi_exp(key, bases, column)[0]
