"""The multi-exponentiation of every homomorphic linear map: ``prod_j c_j^(a_jk)`` for all k.

Straus' simultaneous method (Straus 1964; Moeller 2001 for windows): the exponents of a ``J x K``
matrix of signed integers are cut into ``w``-bit digits, most significant first; each output
squares its accumulator ``w`` times per window (squarings shared by all J bases) and multiplies
in the window's product ``prod_j c_j^(digit_j)``. That product is formed one of two ways, by
cost:

- tables (many outputs over few bases, e.g. the secure layer's ``[[G]] W^T``): ``c_j^d`` for
  ``d < 2^w`` once per base, then one multiplication per non-zero digit;
- buckets (one output over many bases, e.g. the F-statistic's class sums over every row):
  the bases multiplied into the bucket of their digit, then ``sum_d d bucket_d`` by running
  products (Pippenger's trick): ``J + 2^(w+1)`` multiplications per window, no tables.

Negative exponents use the inverses of their bases (one modular inversion for all of them,
Montgomery's batch inversion), so the core only sees non-negative digits. The result is the
unique residue mod n^2, so every method gives the same ciphertexts bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gmpy2
import numpy as np
from gmpy2 import mpz

ONE = mpz(1)
WINDOWS = range(1, 9)  # window widths considered


@dataclass(frozen=True)
class Plan:
    """The digits of a ``J x K`` matrix of signed exponents, cut once for any bases.

    ``columns[k][w]``: the ``(base, digit)`` pairs of output k in window w (most significant
    first); base ``2 j`` is ``c_j``, ``2 j + 1`` its inverse."""

    window: int
    windows: int
    buckets: bool
    inverse: tuple[bool, ...]  # per base j: does some exponent need c_j^-1
    columns: tuple[tuple[tuple[tuple[int, int], ...], ...], ...]

    @classmethod
    def of(
        cls, exponents: np.ndarray | Sequence[Sequence[int]], buckets: bool | None = None
    ) -> Plan:
        """The plan of a ``J x K`` matrix; ``buckets`` forces the method (default: by cost)."""
        values = [[int(v) for v in row] for row in np.asarray(exponents, dtype=object)]
        rows = len(values)
        cols = len(values[0]) if rows else np.shape(exponents)[1]
        bits = max((abs(v).bit_length() for row in values for v in row), default=0)
        used = sum(any(row) for row in values)
        window, cheaper = choose(used, cols, max(bits, 1), buckets)
        buckets = cheaper if buckets is None else buckets
        windows, mask = max(1, -(-bits // window)), (1 << window) - 1
        plan = [[[] for _ in range(windows)] for _ in range(cols)]
        for j, row in enumerate(values):
            for k, v in enumerate(row):
                base, a = 2 * j + (v < 0), abs(v)
                for w in range(windows):
                    d = (a >> (window * (windows - 1 - w))) & mask
                    if d:
                        plan[k][w].append((base, d))
        inverse = tuple(any(v < 0 for v in row) for row in values)
        columns = tuple(tuple(tuple(w) for w in col) for col in plan)
        return cls(window, windows, buckets, inverse, columns)

    @property
    def used(self) -> set[int]:
        return {base for col in self.columns for w in col for base, _ in w}

    def run(self, key, bases: Sequence[mpz], columns: Sequence[int] | None = None) -> list[mpz]:
        """``prod_j bases[j]^(a_jk)`` mod n^2 of ``key`` for each output k of ``columns``
        (default: all)."""
        n2 = key.n2
        extended = _with_inverses(n2, bases, self.inverse)
        picked = range(len(self.columns)) if columns is None else columns
        if self.buckets:
            return [self._run_buckets(n2, extended, self.columns[k]) for k in picked]
        tables = _tables(n2, extended, self.window, self.used)
        return [self._run_tables(n2, tables, self.columns[k]) for k in picked]

    def _run_tables(self, n2: mpz, tables: dict, column) -> mpz:
        acc, square = ONE, 1 << self.window
        for w, digits in enumerate(column):
            if w and acc != ONE:
                acc = gmpy2.powmod(acc, square, n2)
            for base, d in digits:
                acc = acc * tables[base][d] % n2
        return acc

    def _run_buckets(self, n2: mpz, extended: list, column) -> mpz:
        acc, square = ONE, 1 << self.window
        for w, digits in enumerate(column):
            if w and acc != ONE:
                acc = gmpy2.powmod(acc, square, n2)
            if not digits:
                continue
            buckets: dict[int, mpz] = {}
            for base, d in digits:
                b = buckets.get(d)
                buckets[d] = extended[base] if b is None else b * extended[base] % n2
            running, total = ONE, ONE
            for d in range(max(buckets), 0, -1):
                b = buckets.get(d)
                if b is not None:
                    running = b if running is ONE else running * b % n2
                if running is not ONE:
                    total = running if total is ONE else total * running % n2
            acc = total if acc == ONE else acc * total % n2
        return acc


def choose(bases: int, outputs: int, bits: int, only: bool | None = None) -> tuple[int, bool]:
    """The window width and method (buckets or not; ``only``: that method) with the fewest
    multiplications (the squarings are the same)."""
    best = None
    for w in WINDOWS:
        windows = -(-bits // w)
        density = 1 - 2.0**-w  # a digit is non-zero with this probability
        tables = bases * ((1 << w) - 2) + outputs * windows * bases * density
        buckets = outputs * windows * (bases * density + 2 * ((1 << w) - 1))
        for cost, use_buckets in ((tables, False), (buckets, True)):
            if only is not None and use_buckets != only:
                continue
            if best is None or cost < best[0]:
                best = (cost, w, use_buckets)
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


def _tables(n2: mpz, extended: list, window: int, used: set[int]) -> dict[int, list]:
    """``c^d`` for ``d < 2^window``, for every base (and inverse) some digit uses."""
    out = {}
    for i in used:
        c = extended[i]
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
