"""The secure interactive layer's operation counts per protocol step (one party, one batch).

What :mod:`benchmarks.secure_layer` times, counted: the key owner's CRT decryptions (two
exponentiations with a ``k/2``-bit exponent mod p^2 and q^2 each) and, for each homomorphic
product, the multiplications mod n^2 of Straus' method as planned (:class:`~vflfs.ml.paillier.Plan`
on the same exponents as the protocol): tables (powers of each base and of its inverse, per row
block), digits (one per non-zero digit) and squarings (one per bit of the largest exponent of
each output), and the folding of the last row block (Horner's ``SLOT t``-bit shifts).
"""

from __future__ import annotations

import numpy as np

from vflfs.ml import paillier
from vflfs.ml import secure_layer as sl
from vflfs.ml.secure_cipher import tail


def straus(coeffs: np.ndarray, blocks: int, method=None, window=None) -> dict[str, int]:
    """Multiplications mod n^2 of ``blocks`` products with these exponents (J bases, K outputs
    each); ``method`` and ``window`` as :meth:`~vflfs.ml.paillier.Plan.of`."""
    plan = paillier.Plan.of(coeffs, method=method, window=window)
    w, used = plan.window, len(plan.used)
    per_table = (1 << (w - 2) if w > 2 else 0) if plan.method == "naf" else (1 << w) - 2
    inverted = sum(plan.inverse)
    tables = used * per_table * (plan.method != "buckets") + 3 * inverted
    digits = sum(max(sum(len(ds) for _, ds in col) - 1, 0) for col in plan.columns)
    squarings = sum(col[0][0] for col in plan.columns if col)
    return {
        "method": f"{plan.method}, w = {w}",
        "tables": blocks * tables,
        "digits": blocks * digits,
        "squarings": blocks * squarings,
        "inversions": blocks * bool(inverted),
    }


def fold(rows: int, cols: int, slots: int) -> int:
    """Squarings of :func:`~vflfs.ml.secure_layer.fold_tail` for ``rows x cols`` outputs."""
    t, g = tail(rows, slots)
    if g < 2:
        return 0
    groups = -(-cols // g)
    return (cols - groups) * sl.SLOT * t


def decryptions(rows: int, cols: int, slots: int) -> int:
    """Ciphertexts of ``rows x cols`` masked values packed along rows, last block folded."""
    t, g = tail(rows, slots)
    full = -(-rows // slots) - 1
    return full * cols + (-(-cols // g) if g >= 2 else cols)


def step_counts(x: dict, key_bits: int = 2048, fixed: tuple = ()) -> dict[str, dict]:
    """Per protocol step: decryptions and Straus multiplications (one party, B rows);
    ``fixed``: the windows of steps 2, 5 and 6 with fixed windows instead of wNAF."""
    method = "fixed" if fixed else None
    w2, w5, w6 = fixed or (None, None, None)
    slots = paillier.slots_per_plaintext(key_bits, sl.SLOT)
    batch, e = x["g"].shape
    width = x["w"].shape[0]
    nb, ce = -(-batch // slots), -(-e // slots)
    w_tilde = sl.encode(x["w"] + x["eps"])
    return {
        "2": {**straus(w_tilde.T, nb, method, w2), "fold": fold(batch, width, slots)},
        "3": {"decryptions": decryptions(batch, width, slots)},
        "5": straus(sl.encode(x["delta"]), ce, method, w5),
        "6": {
            "decryptions": ce * width,
            **straus(sl.encode(x["eps"]), nb, method, w6),
            "fold": fold(batch, e, slots),
        },
        "7": {"decryptions": decryptions(batch, e, slots)},
    }


if __name__ == "__main__":
    from vflfs.benchmarks.secure_layer import problem

    x = problem(64, 16, 32)
    for fixed in ((5, 5, 4), ()):
        for step, counts in step_counts(x, fixed=fixed).items():
            print(step, counts)
