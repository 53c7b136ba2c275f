"""The secure F-statistic on both sides: the server learns only rho = SSB / SST per feature.

Built like the secure Gini (Li et al. 2023, "FedSDG-FS", INFOCOM, Algorithm 1; masked squaring
of Erkin et al., PETS 2009), for the ANOVA F of :mod:`vflfs.ml.fstat`. Per feature:

1. party (:func:`party_mask`): the server's labels come packed, one plaintext per row and
   chunk of classes (:func:`encrypt_labels`), so prod_a [[P_a]]^(x_a) (one bucketed
   multi-exponentiation, :class:`~vflfs.ml.paillier.Plan`) is [[sum_k S_k 2^(width k)]]: every
   class sum S_k = sum_a x_a A_ak in its slot; the party adds packed masks, so that it sends
   u_k = S_k + r_k, re-randomised, and keeps r_k, S and sum x^2. The masks r_k are uniform in
   [0, 2^(mask_bits + bits(N (2^P - 1)))) above S_k <= N (2^P - 1): statistical distance
   2^-mask_bits (2^-40 by default) from the masks alone.
2. server (:func:`server_square`): decrypts u_k and, with its secret class weights
   v_k = L / n_k (L = prod_k n_k), returns [[sum_k v_k u_k^2]] and [[v_k u_k]] for each k.
3. party (:func:`party_combine`): [[T]] = [[sum v u^2]] - 2 sum_k r_k [[v_k u_k]] +
   sum_k r_k^2 [[v_k]] = [[sum_k v_k S_k^2]], then [[V]] = omega (N [[T]] - S^2 [[L]]),
   re-randomised; omega = round(2^E M / D) normalises by the party's own variance. The
   server sends [[v_k]] and [[L]] encrypted: the class sizes stay its secret. V >= 0 (it is
   L N SSB times omega), below 2^v_width: ``v_per_ct`` features' V travel packed in one
   ciphertext (Horner's rule), so the server decrypts one per group (it learns the same V).
4. server: rho = V / (2^E M L) and F = (N - c) / (c - 1) rho / (1 - rho).

Randomness (``params.djn``) as for the secure Gini: DJN ``h_s^alpha`` for every encryption and
re-randomisation (the default; the assumption is stated in :mod:`vflfs.ml.paillier.djn`), or
``r^n``. The server sees masked sums (statistically hidden) and V, i.e. rho: nothing but F. A
party sees only ciphertexts, and its own features' F at the end.
"""

from __future__ import annotations

import gmpy2
import numpy as np
from gmpy2 import mpz

from .fstat import FStatParams, f_from_rho, quantize
from .gini_secure import encrypt_plain, prepare
from .paillier import (
    ONE,
    Plan,
    PrivateKey,
    PublicKey,
    owner_encrypt,
    pack_plain,
    random_bits,
    rerandomize,
    unpack_plain,
)
from .parallel import chunks, fork_map, shared


def encrypt_labels(key: PrivateKey, y: np.ndarray, params: FStatParams, workers: int) -> list:
    """[[P_at]], rows x chunks (row-major): row a's one-hot labels packed into the slots of
    chunk t (class k in slot k - t per_ct, ``width`` bits each), encrypted once. A party's
    ``prod_a [[P_at]]^(x_a)`` is then every class sum of the chunk, already packed: one
    multi-exponentiation per feature and chunk instead of one per class, and N chunks
    encryptions instead of N (c - 1)."""
    y = np.asarray(y, dtype=np.int64)
    plain = [
        pack_plain([int(y[a] == k) for k in params.chunk(t)], params.width)
        for a in range(len(y))
        for t in range(params.chunks)
    ]
    return encrypt_plain(key, plain, workers, params.djn)


def party_mask(
    X: np.ndarray, labels: list[mpz], key: PublicKey, params: FStatParams, workers: int
) -> tuple[list[list[mpz]], np.ndarray]:
    """Step 1 for every feature: (packed ciphertexts per feature, kept integers per feature:
    masks r_0..r_{c-1}, S, sum x^2 as an object array (features, c + 2))."""
    if len(labels) != len(X) * params.chunks or len(X) != params.rows:
        raise ValueError(f"got {len(labels)} encrypted labels for {len(X)} training rows")
    columns = [labels[t :: params.chunks] for t in range(params.chunks)]
    Xq = quantize(X, params.value_bits)
    prepare(key, params.djn)
    tasks = chunks(Xq.shape[1], workers)
    parts = fork_map(_mask_part, tasks, workers, Xq=Xq, columns=columns, key=key, params=params)
    out = [feature for part in parts for feature in part]
    kept = np.empty((len(out), params.n_classes + 2), dtype=object)
    for f, (_, k) in enumerate(out):
        kept[f] = k
    return [o[0] for o in out], kept


def _mask_part(features: np.ndarray) -> list[tuple]:
    s = shared()
    return [mask_feature(s["Xq"][:, f], s["columns"], s["key"], s["params"]) for f in features]


def mask_feature(
    xq: np.ndarray, columns: list[list[mpz]], key: PublicKey, params: FStatParams
) -> tuple[list[mpz], list[int]]:
    """One feature's step 1: per chunk, [[sum_k S_k 2^(width slot(k))]] = prod_a
    [[P_at]]^(x_a), plus the packed masks, re-randomised; and what the party keeps."""
    plan = Plan.of(np.asarray(xq, dtype=np.int64).reshape(-1, 1))
    r = [random_bits(params.mask_range) for _ in range(params.n_classes)]
    packed = []
    for t, column in enumerate(columns):
        masks = pack_plain([r[j] for j in params.chunk(t)], params.width)
        ct = plan.run(key, column)[0] * key.plain(masks) % key.n2
        packed.append(rerandomize(key, ct, params.djn))
    squares = int((xq.astype(object) ** 2).sum())
    return packed, [*r, int(xq.sum()), squares]


def server_square(
    key: PrivateKey, params: FStatParams, weights: list[int], packed: list[list[mpz]], workers: int
) -> list[list[mpz]]:
    """Per feature: [[sum_k v_k u_k^2]], then [[v_k u_k]] for each class k."""
    prepare(key, params.djn)
    tasks = chunks(len(packed), workers)
    inputs = {"key": key, "params": params, "weights": weights, "packed": packed}
    parts = fork_map(_square_part, tasks, workers, **inputs)
    return [feature for part in parts for feature in part]


def unmasked_sums(key: PrivateKey, params: FStatParams, packed: list[mpz]) -> list[int]:
    u: list[int] = []
    for t, ct in enumerate(packed):
        u += unpack_plain(key.decrypt(ct), len(params.chunk(t)), params.width)
    return u


def _square_part(features: np.ndarray) -> list[list[mpz]]:
    s = shared()
    key, params, v = s["key"], s["params"], s["weights"]
    out = []
    for f in features:
        u = unmasked_sums(key, params, s["packed"][f])
        z = sum(vk * uk * uk for vk, uk in zip(v, u, strict=True))
        enc = [z, *[vk * uk for vk, uk in zip(v, u, strict=True)]]
        out.append([owner_encrypt(key, m, params.djn) for m in enc])
    return out


def party_combine(
    key: PublicKey,
    params: FStatParams,
    kept: np.ndarray,
    returned: list[list[mpz]],
    enc_weights: list[mpz],
    workers: int,
) -> list[mpz]:
    """[[V]] per feature from the server's step-2 ciphertexts, [[v_0]]..[[v_{c-1}]], [[L]]."""
    prepare(key, params.djn)
    tasks = chunks(-(-len(returned) // params.v_per_ct), workers)
    inputs = {"key": key, "params": params, "kept": kept, "returned": returned}
    parts = fork_map(_combine_part, tasks, workers, enc_weights=enc_weights, **inputs)
    return [v for part in parts for v in part]


def _combine_part(groups: np.ndarray) -> list[mpz]:
    s = shared()
    key, params, per = s["key"], s["params"], s["params"].v_per_ct
    shift, out = ONE << params.v_width, []
    for g in groups:
        acc = None
        for f in reversed(range(g * per, min((g + 1) * per, len(s["returned"])))):
            *r, total, squares = (int(x) for x in s["kept"][f])
            z, *vu = s["returned"][f]
            *v_enc, scale = s["enc_weights"]
            t = key.combine([z, *vu, *v_enc], [1, *[-2 * x for x in r], *[x * x for x in r]])
            omega = params.omega(total, squares)
            v = key.combine([t, scale], [params.rows * omega, -omega * total * total])
            acc = v if acc is None else gmpy2.powmod(acc, shift, key.n2) * v % key.n2
        out.append(rerandomize(key, acc, params.djn))
    return out


def server_finish(
    key: PrivateKey, params: FStatParams, scale: int, values: list[mpz], features: int
) -> np.ndarray:
    """F per feature from the decrypted V (``v_per_ct`` per ciphertext) and the server's L."""
    if len(values) != -(-features // params.v_per_ct):
        raise ValueError(f"{len(values)} packed results for {features} features")
    per, width = params.v_per_ct, params.v_width
    v = [x for c in values for x in unpack_plain(key.decrypt(c), per, width)][:features]
    rhos = [params.rho(x, scale) for x in v]
    return np.asarray([f_from_rho(r, params.rows, params.classes_present) for r in rhos])
