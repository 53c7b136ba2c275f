"""The maths of the secure interactive layer (spec section 4, FedSDG-FS Algorithms 2-3).

The well-known secure interactive layer (Zhang et al. 2020; FATE's "interactive layer"). The
interactive weight of party m (``width x e``, ``z_m = g_m W_m^T``) is split additively:
``W_m = W~_m - eps_m``; the server holds ``W~_m``, the party holds its noise ``eps_m``. The
party owns a Paillier key (``[[.]]_m``), the server owns another (``[[.]]_s``). Per batch:

Forward
  1. party -> server: ``[[G]]_m`` (G = fixed-point g_m).
  2. server -> party: ``[[G W~^T + E_s]]_m`` (E_s: the server's fresh mask), re-randomised.
  3. party -> server: ``G W~^T + E_s - G eps^T = z_m + E_s`` (plain, masked).
  4. server: removes E_s and has ``z_m = g_m W_m^T`` (the value the top model needs).

Backward (the server has ``delta = dL/dz``)
  5. server -> party: ``[[G^T delta + R]]_m`` (weight gradient, masked by the server's R) and
     ``[[delta]]_s`` (the server's key).
  6. party -> server: ``G^T delta + R + N`` (N: the party's fresh noise, scaled by 1 / lr into
     ``eps``: ``eps <- eps - lr N``) and ``[[delta eps + r]]_s`` (r: the party's mask),
     re-randomised.
  7. server: ``W~ <- W~ - lr (G^T delta + N)`` (so ``W~ - eps`` moved by exactly ``-lr G^T delta``:
     plain SGD on W), decrypts ``delta eps + r`` and sends the party ``delta W~ - delta eps - r``.
  8. party: adds r and has ``dL/dg_m = delta W_m``.

What each side sees in the clear: the server sees ``z_m`` (as in Zhang et al.: the interactive
layer's per-party output, needed by the top model), ``delta``, ``dL/dW + N`` (noised by the
party) and ``delta eps + r`` (masked); never ``g_m``, ``W_m`` or ``eps``. The party sees
``G W~^T + E_s`` and ``G^T delta + R`` (masked by the server), and ``delta W_m - r`` whose
unmasked value ``dL/dg_m`` it receives in plain VFL too; never ``W~``, ``W``, ``delta`` or
``dL/dW``. The server knows the initial W (a random, data-independent initialisation, as in
the plain model); from the first step on, W is hidden behind the party's accumulated noise.

Values are fixed-point integers (``F`` fractional bits), products carry ``2F``. Masks are
statistical: uniform integers ``MASK_BITS`` bits wide, 56 bits above the masked values' range.
``plaintext`` mode runs the same integer protocol with identity "encryption", so both modes
compute the same numbers. The weight update is plain SGD (the server never sees the true
gradient, so Adam's moments cannot be formed); the head keeps the configured optimiser.

Cost (docs/secure_layer.md): several values share a plaintext (``SLOT``-bit slots, 21 at 2048
bits), laid out so that each product is one scalar per plaintext: G travels packed along its
rows (step 2 sums over columns) and, a second time, along its columns (step 5 sums over rows);
``[[delta]]_s`` along rows (step 6 sums over the width). Every masked slot holds
``value + OFFSET + mask`` in ``[0, 2^SLOT)``, so the slots never borrow from each other; the
party and the server see exactly the masked values above, OFFSET being public. The products are
Straus multi-exponentiations (:func:`vflfs.ml.paillier.multi_exp`), the fresh randomness is
DJN's by default, and the work forks over ``workers`` processes.
"""

from __future__ import annotations

import numpy as np

from .secure_cipher import (
    MASK_BITS,
    OFFSET,
    PLAIN_SLOTS,
    POOL_SIZE,
    RANDOMNESS,
    SCALE,
    SCALE2,
    SLOT,
    WIRE,
    F,
    PaillierCipher,
    PlainCipher,
    decode2,
    default_workers,
    encode,
    fold_tail,
    ints_from_wire,
    ints_to_wire,
    make_cipher,
    mask,
    pack_rows,
    private_cipher,
    public_cipher,
    unfold_tail,
    unpack_rows,
)

__all__ = [
    "F",
    "MASK_BITS",
    "OFFSET",
    "PLAIN_SLOTS",
    "POOL_SIZE",
    "RANDOMNESS",
    "SCALE",
    "SCALE2",
    "SLOT",
    "WIRE",
    "PaillierCipher",
    "PlainCipher",
    "decode2",
    "default_workers",
    "encode",
    "fold_tail",
    "ints_from_wire",
    "ints_to_wire",
    "make_cipher",
    "mask",
    "pack_rows",
    "private_cipher",
    "public_cipher",
    "unfold_tail",
    "unpack_rows",
]


# -- party side -----------------------------------------------------------------------------------
def party_encrypt(own: PlainCipher, g: np.ndarray, columns: bool = True) -> list[np.ndarray]:
    """Step 1: ``[[G]]_m`` on the wire, packed along rows (``nb x e``, for steps 2-3) and, with
    ``columns``, along columns (``ce x B``, for step 5): the same G twice."""
    big_g = encode(g)
    parts = [pack_rows(big_g, own.slots)] + ([pack_rows(big_g.T, own.slots)] if columns else [])
    flat = own.encrypt(np.concatenate([p.ravel() for p in parts]))
    out, start = [], 0
    for p in parts:
        out.append(own.to_wire(flat[start : start + p.size].reshape(p.shape)))
        start += p.size
    return out


def party_forward(own: PlainCipher, wire: np.ndarray, g: np.ndarray, eps: np.ndarray):
    """Step 3: decrypt ``[[G W~^T + E_s]]``, remove ``G eps^T``: ``z + E_s`` on the wire."""
    plain = unfold_tail(own.decrypt(own.from_wire(wire)), len(g), eps.shape[0], own.slots)
    y = unpack_rows(plain, len(g), own.slots)
    return ints_to_wire(y - encode(g).dot(encode(eps).T))


def party_backward(
    own: PlainCipher,
    server: PlainCipher,
    gradw: np.ndarray,
    delta: np.ndarray,
    eps: np.ndarray,
    noise: float,
    rng: np.random.Generator,
    rows: int,
):
    """Step 6 for a batch of ``rows`` rows. Returns the two wire arrays, the mask r to keep, and
    the noise N (the caller updates ``eps <- eps - lr N`` after this batch)."""
    n = rng.normal(0.0, noise, size=eps.shape) if noise > 0 else np.zeros(eps.shape)
    gw = unpack_rows(own.decrypt(own.from_wire(gradw)), eps.shape[1], own.slots)  # e x width
    m = gw.T + np.rint(n * SCALE2).astype(np.int64).astype(object)
    r = mask((rows, eps.shape[1]))
    d = server.from_wire(delta)  # [[delta]]_s packed along rows, nb x width
    de = server.affine(d, encode(eps), pack_rows(r, server.slots, OFFSET))
    return ints_to_wire(m), server.to_wire(fold_tail(server, de, rows)), r, n


def party_gradient(wire: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Step 8: ``dL/dg = delta W`` (float32)."""
    return decode2(ints_from_wire(wire) + r)


# -- server side ----------------------------------------------------------------------------------
def server_forward(party: PlainCipher, cts: np.ndarray, w_tilde: np.ndarray, rows: int):
    """Step 2: ``[[G W~^T + E_s]]`` (packed along rows) on the wire, and the mask E_s to keep."""
    e_s = mask((rows, w_tilde.shape[0]))
    y = party.affine(cts, encode(w_tilde).T, pack_rows(e_s, party.slots, OFFSET))
    return party.to_wire(fold_tail(party, y, rows)), e_s


def server_z(wire: np.ndarray, e_s: np.ndarray) -> np.ndarray:
    """Step 4: ``z_m = g_m W_m^T``."""
    return decode2(ints_from_wire(wire) - e_s)


def server_delta(own: PlainCipher, delta: np.ndarray) -> np.ndarray:
    """Step 5: ``[[delta]]_s`` (packed along rows) on the wire; one for every party (delta is
    the same for all, and each re-randomises what it returns)."""
    return own.to_wire(own.encrypt(pack_rows(encode(delta), own.slots)))


def server_backward(
    party: PlainCipher,
    own: PlainCipher,
    cts_t: np.ndarray,
    delta: np.ndarray,
    w_tilde: np.ndarray,
    enc_delta: np.ndarray | None = None,
):
    """Step 5 from the column-packed ``[[G^T]]``: ``[[G^T delta + R^T]]_m`` (packed along G's
    columns) and ``[[delta]]_s`` (:func:`server_delta`, made here unless given) on the wire;
    keeps R (width x e) and ``delta W~`` (step 7 needs the weights of the forward pass)."""
    d = encode(delta)
    big_r = mask(w_tilde.shape)
    gw = party.affine(cts_t, d, pack_rows(big_r.T, party.slots, OFFSET))  # ce x width
    enc_d = server_delta(own, delta) if enc_delta is None else enc_delta
    return party.to_wire(gw), enc_d, big_r, d.dot(encode(w_tilde))


def server_weight_gradient(wire: np.ndarray, big_r: np.ndarray) -> np.ndarray:
    """Step 7: ``dL/dW + N`` (the party's noise), width x e."""
    return decode2(ints_from_wire(wire) - big_r)


def server_embedding_gradient(own: PlainCipher, wire: np.ndarray, dw: np.ndarray) -> np.ndarray:
    """Step 7: ``delta W~ - (delta eps + r)`` on the wire."""
    plain = unfold_tail(own.decrypt(own.from_wire(wire)), dw.shape[0], dw.shape[1], own.slots)
    de = unpack_rows(plain, dw.shape[0], own.slots)
    return ints_to_wire(dw - de)
