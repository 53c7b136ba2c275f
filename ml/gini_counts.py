"""A party's encrypted bin counts [[n_ik]] for two features at once.

Per feature and class the party multiplies the [[A_ak]] of every row outside the largest bin
(that bin is the class total minus the others): (c - 1)(N - largest bin) multiplications mod
n^2 per feature, the largest cost of the secure Gini with many classes (COIL20: 19 classes,
1440 rows). Two features f, g split the rows into the cells (i, j) of their joint bins; a cell
sum serves both features, so the pair costs, per class, one multiplication per row outside the
cell (largest bin of f, largest bin of g), which neither needs, plus about one per non-empty
cell and feature to add cells into bins:

    N - |cell (L_f, L_g)| + 2 cells     instead of     2 N - |L_f| - |L_g|,

~40 % fewer on neighbouring COIL20 pixels (64 cells on average), ~30 % on independent
features binned from normal values. The counts are the same ciphertexts' products in another
order: the same plaintexts, nothing else changes.
"""

from __future__ import annotations

import gmpy2
import numpy as np
from gmpy2 import mpz

from .paillier import ONE, PublicKey

Counts = tuple[list[list[mpz]], np.ndarray]  # [[n_ik]] (bins x classes), bin sizes |U_i|


def with_last_class(key: PublicKey, counts: list[list[mpz]], sizes: np.ndarray) -> Counts:
    """Append the last class per bin: |U_i| minus the other classes (one inversion)."""
    n2 = key.n2
    for i, row in enumerate(counts):
        row.append(key.plain(int(sizes[i])) * gmpy2.invert(key.product(row), n2) % n2)
    return counts, sizes


def pair_counts(
    bins_f: np.ndarray,
    bins_g: np.ndarray,
    columns: list[list[mpz]],
    totals: list[mpz],
    key: PublicKey,
    b: int,
) -> tuple[Counts, Counts]:
    """[[n_ik]] and |U_i| of features f and g (bin indices ``bins_f``, ``bins_g`` per row) from
    the encrypted label columns (k < c - 1) and their totals, through the joint cells."""
    sizes = [np.bincount(bins_f, minlength=b), np.bincount(bins_g, minlength=b)]
    big = [int(np.argmax(s)) for s in sizes]
    cell = bins_f * b + bins_g
    rows = np.flatnonzero(cell != big[0] * b + big[1])
    order = rows[np.argsort(cell[rows], kind="stable")]
    ids, starts = np.unique(cell[order], return_index=True)
    members = np.split(order, starts[1:]) if len(order) else []
    users = [
        [[t for t, v in enumerate(ids) if v // b == i] for i in range(b)],  # f's bin i
        [[t for t, v in enumerate(ids) if v % b == j] for j in range(b)],  # g's bin j
    ]
    out: list[list[list[mpz]]] = [[[] for _ in range(b)], [[] for _ in range(b)]]
    for k, col in enumerate(columns):
        sums = [key.product([col[a] for a in m.tolist()]) for m in members]
        for side in (0, 1):
            bins = [
                ONE if i == big[side] else key.product([sums[t] for t in used])
                for i, used in enumerate(users[side])
            ]
            bins[big[side]] = totals[k] * gmpy2.invert(key.product(bins), key.n2) % key.n2
            for i in range(b):
                out[side][i].append(bins[i])
    return with_last_class(key, out[0], sizes[0]), with_last_class(key, out[1], sizes[1])
