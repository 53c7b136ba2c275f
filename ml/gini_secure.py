"""The secure Gini computation (FedSDG-FS Algorithm 1) on both sides, in gmpy2 integers.

Li et al. 2023, "FedSDG-FS", INFOCOM, Algorithm 1, with the masked squaring of Erkin et al.
("Privacy-Preserving Face Recognition", PETS 2009): to square an encrypted n the party sends
[[n + r]], the key owner decrypts u = n + r and returns [[u^2]], and the party forms
[[n^2]] = [[u^2]] - 2 r [[n]] - r^2 (equal to [[u^2]] - 2 r [[u]] + r^2). Here, per feature:

1. party (:func:`party_mask`): [[n_ik]] by additions of the server's [[A_ak]] (k < c-1; the last
   class is |U_i| minus the others); the b*c masked values u_ik = n_ik + r_ik travel packed in
   ``per_ct``-slot plaintexts, each ciphertext re-randomised. It keeps, for step 3,
   [[-2 sum_i w_i sum_k r_ik n_ik - sum_i w_i sum_k r_ik^2]] and its weights w_i. The bin
   sums of two features come from their joint cells (:mod:`.gini_counts`). With many classes
   (``params.class_packed``) the server also encrypts each row's labels packed by groups of
   classes, so that a bin's sum of them is already the group's packed counts: no packing by
   Horner's rule but for the last classes, and plaintexts below p that the server decrypts
   mod p^2 only (COIL20: ~7,300 instead of ~16,000 multiplications per feature for these).
2. server (:func:`server_square`): decrypts u_ik (statistically masked) and returns one
   ciphertext per bin, [[sum_k u_ik^2]] (the party weighs bins, not classes).
3. party (:func:`party_combine`): [[Q]] = sum_i w_i [[sum_k u_ik^2]] + the kept term, so
   Q = sum_i w_i sum_k n_ik^2; re-randomised.
4. server (:func:`server_finish`): G = 1 - Q / (N 2^F); the party packs ``q_per_ct`` features'
   Q in one ciphertext (the server learns the same Q, with fewer decryptions).

With two classes the party sends instead, per bin, a_i = n_i + r_i and b_i = 2 w_i n_i + r'_i
and the server returns one ciphertext per feature, [[sum_i a_i b_i]] (:mod:`.gini_product`).

Randomness (``params.djn``): with DJN randomness (the default) every encryption by the server and
every re-randomisation by a party multiplies by ``h_s^alpha`` (:meth:`PublicKey.djn_obfuscator`,
~12x cheaper than ``r^n`` at 2048 bits; the assumption is stated in :mod:`vflfs.ml.paillier.djn`);
otherwise the server uses CRT ``r^n`` and the parties ``r^n``. The masks r_ik are uniform in
[0, 2^(mask_bits + bits(N))) above counts n_ik <= N: each u_ik is within statistical distance
2^-mask_bits (2^-40 by default) of its mask alone. The products with the masks and weights are
:func:`~vflfs.ml.paillier.power_product`. The work per feature is independent, so both sides
split features over a fork pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import gmpy2
import numpy as np
from gmpy2 import mpz

from . import gini_product as product
from .gini import GiniParams, bin_features, finish, fixed_weight
from .gini_counts import Sums, bin_sums, pair_sums, split_counts
from .paillier import (
    PrivateKey,
    PublicKey,
    djn_crt_tables,
    djn_table,
    owner_encrypt,
    pack,
    pack_plain,
    power_product,
    random_bits,
    rerandomize,
    unpack_plain,
)
from .parallel import chunks, fork_map, shared


@dataclass
class Masked:
    """A party's step-1 output: what it sends (``packed``) and what it keeps."""

    packed: list[list[mpz]]  # per feature: params.chunks ciphertexts
    kept: list[mpz]  # per feature: [[-2 sum w r n - sum w r^2]]
    weights: np.ndarray  # (features, bins) int64: w_i
    djn: bool = True  # re-randomise with DJN obfuscators (params.djn)
    product: bool = False  # two classes: the server returns [[sum_i a_i b_i]] (gini_product)
    q_width: int = 64  # bits of a packed Q slot (params.q_width)
    q_per_ct: int = 1  # features per returned [[Q]] (params.q_per_ct)


def prepare(key: PublicKey | PrivateKey, djn: bool) -> None:
    """Build the DJN tables once in this process, before the workers fork (they inherit them):
    the public key's, and the key owner's CRT ones (:func:`owner_encrypt`)."""
    if not djn:
        return
    if isinstance(key, PrivateKey):
        djn_crt_tables(key.p, key.q)
        key = key.public
    djn_table(key.n)


def encrypt_labels(key: PrivateKey, y: np.ndarray, params: GiniParams, workers: int) -> list[mpz]:
    """Row-major (rows, ``params.label_columns``): [[A_ak]] for k < c-1, the one-hot label
    matrix without its last, redundant column, then (class-packed) [[sum_k A_ak 2^(width k)]]
    per group of classes; encrypted once with the key owner's fast obfuscators."""
    y = np.asarray(y, dtype=np.int64)
    c1, width = params.n_classes - 1, params.width
    groups = params.class_groups if params.class_packed else []
    plain = []
    for label in y.tolist():
        plain += [int(label == k) for k in range(c1)]
        plain += [pack_plain([int(label == k) for k in group], width) for group in groups]
    return encrypt_plain(key, plain, workers, params.djn)


def encrypt_plain(key: PrivateKey, plain: list[int], workers: int, djn: bool) -> list[mpz]:
    """The key owner's encryptions of ``plain`` (DJN or CRT randomness), over the workers."""
    prepare(key, djn)
    parts = fork_map(
        _encrypt_part, chunks(len(plain), workers), workers, key=key, plain=plain, djn=djn
    )
    return [c for part in parts for c in part]


def _encrypt_part(index: np.ndarray) -> list[mpz]:
    key, plain, djn = shared()["key"], shared()["plain"], shared()["djn"]
    return [owner_encrypt(key, plain[i], djn) for i in index]


# -- party, step 1 ---------------------------------------------------------------------------------
def party_mask(
    X: np.ndarray,
    labels: list[mpz],
    key: PublicKey,
    params: GiniParams,
    workers: int,
    shifted: list | None = None,
) -> Masked:
    """Bin the party's training rows ``X``, sum [[A]] per bin, mask, pack, re-randomise.

    Two classes: ``shifted`` (:func:`.gini_product.shift_labels`) is made here when
    :func:`.gini_product.use_shifts` says it pays, unless given."""
    per_row = params.label_columns
    columns = [labels[k::per_row] for k in range(per_row)]
    if len(columns[0]) != len(X) or len(X) != params.rows:
        raise ValueError(f"got {len(columns[0])} encrypted labels for {len(X)} training rows")
    binned = bin_features(X, params.bins)
    totals = [key.product(col) for col in columns]
    prepare(key, params.djn)
    if shifted is None and params.product and product.use_shifts(params, binned.shape[1]):
        shifted = product.shift_labels(key, params, labels, workers)
    parts = fork_map(
        _mask_part,
        chunks(binned.shape[1], workers),
        workers,
        binned=binned,
        columns=columns,
        totals=totals,
        key=key,
        params=params,
        shifted=shifted,
    )
    out = [feature for part in parts for feature in part]
    return Masked(
        packed=[o[0] for o in out],
        kept=[o[1] for o in out],
        weights=np.asarray([o[2] for o in out], dtype=np.int64).reshape(-1, params.bins),
        djn=params.djn,
        product=params.product,
        q_width=params.q_width,
        q_per_ct=params.q_per_ct,
    )


def _mask_part(features: np.ndarray) -> list[tuple]:
    s = shared()
    key, params, columns, totals = s["key"], s["params"], s["columns"], s["totals"]
    if params.product:
        return [
            product.mask_feature(
                s["binned"][:, f], columns[0], totals[0], key, params, s["shifted"]
            )
            for f in features
        ]
    out = []
    for f, g in zip(features[0::2], features[1::2], strict=False):  # bin sums by pairs
        both = pair_sums(s["binned"][:, f], s["binned"][:, g], columns, totals, key, params.bins)
        out += [mask_feature(None, columns, totals, key, params, summed=c) for c in both]
    if len(features) % 2:
        out.append(mask_feature(s["binned"][:, features[-1]], columns, totals, key, params))
    return out


def mask_feature(
    bins_of: np.ndarray | None,
    columns: list[list[mpz]],
    totals: list[mpz],
    key: PublicKey,
    params: GiniParams,
    masks: list[int] | None = None,
    summed: Sums | None = None,
) -> tuple[list[mpz], mpz, list[int]]:
    """One feature's step 1: (packed ciphertexts, kept ciphertext, weights).

    ``columns``: the label columns (``params.label_columns``). ``masks`` (b*c values in slot
    order j = i*c + k) default to fresh CSPRNG draws; the packed ciphertexts are re-randomised
    either way. ``summed``: the feature's bin sums if taken already
    (:func:`.gini_counts.pair_sums`; then ``bins_of`` is not used).
    """
    b, c, width = params.bins, params.n_classes, params.width
    sums = summed or bin_sums(bins_of, columns, totals, key, b)
    (counts, sizes), grouped = split_counts(key, sums, c)
    r = masks or [random_bits(params.mask_range) for _ in range(params.slots)]
    flat = [counts[i][k] for i in range(b) for k in range(c)]
    layout = params.layout
    if params.class_packed:  # per bin its groups' sums as they are; the last classes by Horner
        bases = [ct for row in grouped for ct in row]
        bases += [pack(key, [flat[j] for j in js], width) for js in layout[len(bases) :]]
    else:
        bases = [pack(key, [flat[j] for j in js], width) for js in layout]
    packed = [
        rerandomize(key, ct * key.plain(pack_plain([r[j] for j in js], width)) % key.n2, params.djn)
        for ct, js in zip(bases, layout, strict=True)
    ]
    w = [fixed_weight(int(s), params.weight_bits) for s in sizes]
    cts, coeffs, const = [], [], 0
    for i in range(b):
        last = r[i * c + c - 1]
        for k in range(c - 1):
            cts.append(counts[i][k])
            coeffs.append(-2 * w[i] * (r[i * c + k] - last))
        const -= w[i] * (2 * last * int(sizes[i]) + sum(x * x for x in r[i * c : i * c + c]))
    return packed, power_product(key, cts, coeffs) * key.plain(const) % key.n2, w


# -- server, step 2 ----------------------------------------------------------------------------
def server_square(
    key: PrivateKey, params: GiniParams, packed: list[list[mpz]], workers: int
) -> list[list[mpz]]:
    """Per feature, per bin: [[sum_k u_ik^2]] from the party's packed masked values."""
    prepare(key, params.djn)
    parts = fork_map(
        _square_part, chunks(len(packed), workers), workers, key=key, params=params, packed=packed
    )
    return [feature for part in parts for feature in part]


def _square_part(features: np.ndarray) -> list[list[mpz]]:
    s = shared()
    return [square_feature(s["key"], s["params"], s["packed"][f]) for f in features]


def unmasked_slots(key: PrivateKey, params: GiniParams, packed: list[mpz]) -> list[int]:
    """The masked values u_ik a feature's ciphertexts carry (all the server ever sees of them),
    in slot order. Class-packed plaintexts lie below p: decrypted mod p^2 only."""
    below_p = params.class_packed and params.half_slots * params.width < key.p.bit_length()
    decrypt = key.decrypt_below_p if below_p else key.decrypt
    u = [0] * params.slots
    for ct, js in zip(packed, params.layout, strict=True):
        for j, value in zip(js, unpack_plain(decrypt(ct), len(js), params.width), strict=True):
            u[j] = value
    return u


def square_feature(key: PrivateKey, params: GiniParams, packed: list[mpz]) -> list[mpz]:
    if params.product:
        return product.square_feature(key, params, packed)
    u, c = unmasked_slots(key, params, packed), params.n_classes
    return [
        owner_encrypt(key, sum(x * x for x in u[i * c : i * c + c]), params.djn)
        for i in range(params.bins)
    ]


# -- party, step 3 -----------------------------------------------------------------------------
def party_combine(
    key: PublicKey, masked: Masked, squares: list[list[mpz]], workers: int
) -> list[mpz]:
    """[[Q]] per feature: sum_i w_i [[sum_k u_ik^2]] (product form: [[sum_i a_i b_i]]) + the
    kept term; ``q_per_ct`` features' Q packed in one plaintext (Horner's rule, q_width
    squarings per feature; Q is the result the server learns anyway), re-randomised."""
    prepare(key, masked.djn)
    groups = -(-len(squares) // masked.q_per_ct)
    parts = fork_map(
        _combine_part,
        chunks(groups, workers),
        workers,
        key=key,
        masked=masked,
        squares=squares,
    )
    return [q for part in parts for q in part]


def _combine_part(groups: np.ndarray) -> list[mpz]:
    key, masked, squares = shared()["key"], shared()["masked"], shared()["squares"]
    out, shift, per = [], mpz(1) << masked.q_width, masked.q_per_ct
    for g in groups:
        acc = None
        for f in reversed(range(g * per, min((g + 1) * per, len(squares)))):
            if masked.product:  # [[sum_i a_i b_i]]: the weights are inside already
                q = squares[f][0] * masked.kept[f] % key.n2
            else:
                weights = [int(w) for w in masked.weights[f]]
                q = power_product(key, squares[f], weights) * masked.kept[f] % key.n2
            acc = q if acc is None else gmpy2.powmod(acc, shift, key.n2) * q % key.n2
        out.append(rerandomize(key, acc, masked.djn))
    return out


# -- server, step 4 ----------------------------------------------------------------------------
def server_finish(
    key: PrivateKey, params: GiniParams, weighted: list[mpz], features: int, workers: int = 1
) -> np.ndarray:
    """G(f) = 1 - Q / (N 2^F) for each of ``features`` features' decrypted Q (``q_per_ct``
    per ciphertext)."""
    if len(weighted) != -(-features // params.q_per_ct):
        raise ValueError(f"{len(weighted)} packed results for {features} features")
    parts = fork_map(
        _finish_part, chunks(len(weighted), workers), workers, key=key, weighted=weighted
    )
    packed = [v for part in parts for v in part]
    q = [v for m in packed for v in unpack_plain(m, params.q_per_ct, params.q_width)][:features]
    return np.asarray([finish(v, params.rows, params.weight_bits) for v in q])


def _finish_part(features: np.ndarray) -> list[int]:
    key, weighted = shared()["key"], shared()["weighted"]
    return [int(key.decrypt(weighted[f])) for f in features]
