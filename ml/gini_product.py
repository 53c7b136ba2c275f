"""The secure Gini for two classes: one masked product per bin, one returned ciphertext.

With two classes the last class is the bin minus the first (n_i1 = |U_i| - n_i), so
sum_k n_ik^2 = 2 n_i^2 - 2 |U_i| n_i + |U_i|^2 and the weighted sum the server needs is

    Q = sum_i w_i (2 n_i^2 - 2 |U_i| n_i + |U_i|^2),     n_i = n_i0, w_i = round(2^F / |U_i|).

Its only part of degree two is sum_i n_i (2 w_i n_i), a sum of products of two numbers the party
holds encrypted. Masked multiplication (the two-operand form of Erkin et al.'s masked squaring):
per bin the party sends a_i = n_i + r_i and b_i = 2 w_i n_i + r'_i, packed and re-randomised; the
server decrypts them and returns the one ciphertext [[sum_i a_i b_i]]; since
a_i b_i = 2 w_i n_i^2 + (r'_i + 2 w_i r_i) n_i + r_i r'_i, the party forms

    [[Q]] = [[sum_i a_i b_i]] - sum_i (r'_i + 2 w_i r_i + 2 w_i |U_i|) [[n_i]]
            - sum_i r_i r'_i + sum_i w_i |U_i|^2.

The weights are exactly Algorithm 1's w_i, applied by the party (the server never sees them),
and Q equals the plaintext fixed-point Q bit for bit.

What the server learns, against the per-bin squaring (:mod:`vflfs.ml.gini_secure`): per bin
two masked values, as before (u_i0, u_i1 there). a_i hides a count n_i <= N < 2^bits(N) under a
mask uniform in [0, 2^(mask_bits + bits(N))), as u_ik did; b_i hides 2 w_i n_i < 2^(F + 2) (the
weight, hence the bin size, is in it) under an independent mask uniform in
[0, 2^(F + 2 + mask_bits)): each value is within statistical distance 2^-mask_bits of its mask
alone, and the masks are independent, so the whole view is within 2 b 2^-mask_bits per feature of
one that does not depend on the data, the same bound as the squaring's b c = 2 b masked values.
The returned ciphertext is a fresh encryption by the server (its randomness as before), and
the party's [[Q]] is re-randomised: the party learns nothing, and the server only Q.

Cost per feature: the server decrypts ``chunks`` plaintexts (one at 2048 bits: 10 pairs of
49 + 95 bits) and encrypts one value, instead of one decryption and b = 10 encryptions. The
party forms the packed a_i, b_i as one multi-exponentiation of its bin sums; with many features
per row (ARCENE: 10,000 features, 200 rows) it first shifts every row's label ciphertext to each
bin's slot position once (:func:`shift_labels`, rows x bins_per_ct ciphertexts), so that a
feature's packing costs a sum per bin of shifted labels and one multi-exponentiation with
~100-bit exponents, instead of ~1440 squarings.
"""

from __future__ import annotations

import gmpy2
import numpy as np
from gmpy2 import mpz

from .gini import GiniParams, fixed_weight
from .paillier import (
    ONE,
    PrivateKey,
    PublicKey,
    owner_encrypt,
    power_product,
    random_bits,
    rerandomize,
)
from .parallel import chunks, fork_map, shared


def use_shifts(params: GiniParams, features: int) -> bool:
    """Shift the labels ahead (rows x bins_per_ct ciphertexts) when it pays: a feature's packing
    then costs about N multiplications instead of ~pair_width bins_per_ct squarings, and the
    shifts cost N pair_width (bins_per_ct - 1) squarings once; taken when the saving is at
    least twice that (ARCENE: 200 rows, thousands of features per party; not MADELON's 2600
    rows)."""
    saving = params.pair_width * params.bins_per_ct - params.rows
    once = params.rows * params.pair_width * (params.bins_per_ct - 1)
    return saving > 0 and features * saving >= 2 * once


def shift_labels(key: PublicKey, params: GiniParams, labels: list[mpz], workers: int) -> list:
    """Per row a, [[A_a 2^(j pair_width)]] for every slot position j of a packed plaintext."""
    parts = fork_map(
        _shift_part, chunks(len(labels), workers), workers, key=key, params=params, labels=labels
    )
    return [row for part in parts for row in part]


def _shift_part(index: np.ndarray) -> list[list[mpz]]:
    key, params, labels = shared()["key"], shared()["params"], shared()["labels"]
    step, out = mpz(1) << params.pair_width, []
    for a in index:
        row = [labels[a]]
        for _ in range(1, params.bins_per_ct):
            row.append(gmpy2.powmod(row[-1], step, key.n2))
        out.append(row)
    return out


def bin_sums(
    key: PublicKey, groups: list[np.ndarray], sizes: np.ndarray, labels: list[mpz], total: mpz
) -> list[mpz]:
    """[[n_i]] per bin (the largest bin: the total minus the others, one inversion)."""
    big, n2 = int(np.argmax(sizes)), key.n2
    sums = [ONE if i == big else key.product([labels[a] for a in g]) for i, g in enumerate(groups)]
    sums[big] = total * gmpy2.invert(key.product(sums), n2) % n2
    return sums


def mask_feature(
    bins_of: np.ndarray,
    labels: list[mpz],
    total: mpz,
    key: PublicKey,
    params: GiniParams,
    shifted: list | None = None,
    masks: tuple[list[int], list[int]] | None = None,
) -> tuple[list[mpz], mpz, list[int]]:
    """One feature's step 1: (packed a_i, b_i ciphertexts, kept ciphertext, weights).

    ``shifted``: :func:`shift_labels` (or None: pack by exponentiation). ``masks``: (r, r'),
    default fresh CSPRNG draws; the packed ciphertexts are re-randomised either way."""
    b, width, per = params.bins, params.width, params.bins_per_ct
    sizes = np.bincount(bins_of, minlength=b)
    groups = np.split(np.argsort(bins_of, kind="stable"), np.cumsum(sizes)[:-1])
    counts = bin_sums(key, groups, sizes, labels, total)
    r, s = masks or (
        [random_bits(params.mask_range) for _ in range(b)],
        [random_bits(params.b_mask_range) for _ in range(b)],
    )
    w = [fixed_weight(int(z), params.weight_bits) for z in sizes]
    packed = []
    for t in range(params.chunks):
        bins = range(t * per, min((t + 1) * per, b))
        scale = [1 + (2 * w[i] << width) for i in bins]
        if shifted is None:
            bases = [counts[i] for i in bins]
            scale = [e << (j * params.pair_width) for j, e in enumerate(scale)]
        else:
            bases = [key.product([shifted[a][i - t * per] for a in groups[i]]) for i in bins]
        plain = sum((r[i] + (s[i] << width)) << (j * params.pair_width) for j, i in enumerate(bins))
        ct = power_product(key, bases, scale) * key.plain(plain) % key.n2
        packed.append(rerandomize(key, ct, params.djn))
    coeffs = [-(s[i] + 2 * w[i] * (r[i] + int(sizes[i]))) for i in range(b)]
    const = sum(w[i] * int(sizes[i]) ** 2 - r[i] * s[i] for i in range(b))
    return packed, power_product(key, counts, coeffs) * key.plain(const) % key.n2, w


def unmasked_pairs(key: PrivateKey, params: GiniParams, packed: list[mpz]) -> list[tuple]:
    """The masked (a_i, b_i) of a feature's ciphertexts (all the server ever sees of them)."""
    width, mask_a = params.width, (1 << params.width) - 1
    mask_b, out = (1 << (params.b_mask_range + 1)) - 1, []
    for t, ct in enumerate(packed):
        m = int(key.decrypt(ct))
        for j in range(min(params.bins_per_ct, params.bins - t * params.bins_per_ct)):
            pair = m >> (j * params.pair_width)
            out.append((pair & mask_a, (pair >> width) & mask_b))
    return out


def square_feature(key: PrivateKey, params: GiniParams, packed: list[mpz]) -> list[mpz]:
    """The server's step 2 for one feature: [[sum_i a_i b_i]], one fresh encryption."""
    total = sum(a * b for a, b in unmasked_pairs(key, params, packed))
    return [owner_encrypt(key, total, params.djn)]
