"""The maths of the secure interactive layer (SPEC section 4, FedSDG-FS Algorithms 2-3).

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
"""

from __future__ import annotations

import secrets

import numpy as np
import torch
from gmpy2 import mpz

from . import paillier
from .metrics import score

F = 20
SCALE = 1 << F
SCALE2 = float(SCALE) * float(SCALE)
MASK_BITS = 2 * F + 56
WIRE = 16  # bytes of a masked plaintext integer on the wire (signed, 128 bits)


# -- fixed point and masks ----------------------------------------------------------------------
def encode(x: np.ndarray) -> np.ndarray:
    """Fixed-point integers (Python ints in an object array) of ``x`` at scale 2^F."""
    return np.rint(np.asarray(x, dtype=np.float64) * SCALE).astype(np.int64).astype(object)


def decode2(ints: np.ndarray) -> np.ndarray:
    """Floats of integers at scale 2^(2F) (a product of two encodings)."""
    return (np.asarray(ints, dtype=object).astype(np.float64) / SCALE2).astype(np.float32)


def mask(shape: tuple[int, ...]) -> np.ndarray:
    """Uniform statistical masks in [0, 2^MASK_BITS) (CSPRNG)."""
    size = int(np.prod(shape))
    return np.array([secrets.randbits(MASK_BITS) for _ in range(size)], dtype=object).reshape(shape)


def ints_to_wire(ints: np.ndarray) -> np.ndarray:
    """Signed integers as ``uint8`` of shape ``ints.shape + (WIRE,)``."""
    flat = np.asarray(ints, dtype=object).ravel()
    raw = b"".join(int(v).to_bytes(WIRE, "big", signed=True) for v in flat)
    return np.frombuffer(raw, dtype=np.uint8).reshape(*np.shape(ints), WIRE)


def ints_from_wire(array: np.ndarray) -> np.ndarray:
    array = np.ascontiguousarray(array, dtype=np.uint8)
    flat = array.reshape(-1, WIRE)
    out = [int.from_bytes(row.tobytes(), "big", signed=True) for row in flat]
    return np.array(out, dtype=object).reshape(array.shape[:-1])


# -- ciphers: identity (plaintext mode) or Paillier ---------------------------------------------
class PlainCipher:
    """``plaintext`` mode: the same protocol with identity encryption (integers in the clear)."""

    kind = "plaintext"

    def encrypt(self, ints: np.ndarray) -> np.ndarray:
        return np.array(ints, dtype=object)

    def decrypt(self, cts: np.ndarray) -> np.ndarray:
        return np.array(cts, dtype=object)

    def matmul(self, cts: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
        """Enc(M C) from Enc(M) and plain integer C."""
        return np.asarray(cts, dtype=object).dot(np.asarray(coeffs, dtype=object))

    def add(self, cts: np.ndarray, ints: np.ndarray) -> np.ndarray:
        return np.asarray(cts, dtype=object) + np.asarray(ints, dtype=object)

    def rerandomize(self, cts: np.ndarray) -> np.ndarray:
        return cts

    def to_wire(self, cts: np.ndarray) -> np.ndarray:
        return ints_to_wire(cts)

    def from_wire(self, array: np.ndarray) -> np.ndarray:
        return ints_from_wire(array)

    def public_bytes(self) -> np.ndarray:
        return np.zeros(0, np.uint8)


class PaillierCipher(PlainCipher):
    """Raw Paillier (:mod:`vflfs.ml.paillier`); with ``private`` the key owner's side too."""

    kind = "paillier"

    def __init__(self, public: paillier.PublicKey, private: paillier.PrivateKey | None = None):
        self.public = public
        self.private = private

    def encrypt(self, ints: np.ndarray) -> np.ndarray:
        enc = self.private.encrypt if self.private is not None else self.public.encrypt
        flat = [enc(int(v)) for v in np.asarray(ints, dtype=object).ravel()]
        return np.array(flat, dtype=object).reshape(np.shape(ints))

    def decrypt(self, cts: np.ndarray) -> np.ndarray:
        flat = [self.private.decrypt_signed(c) for c in np.asarray(cts, dtype=object).ravel()]
        return np.array(flat, dtype=object).reshape(np.shape(cts))

    def matmul(self, cts: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
        cts, coeffs = np.asarray(cts, dtype=object), np.asarray(coeffs, dtype=object)
        rows = [list(r) for r in cts]
        cols = [[int(v) for v in coeffs[:, k]] for k in range(coeffs.shape[1])]
        out = np.empty((cts.shape[0], coeffs.shape[1]), dtype=object)
        for i, r in enumerate(rows):
            for k, c in enumerate(cols):
                out[i, k] = self.public.combine(r, c)
        return out

    def add(self, cts: np.ndarray, ints: np.ndarray) -> np.ndarray:
        n2, plain = self.public.n2, self.public.plain
        flat = [
            c * plain(int(v)) % n2
            for c, v in zip(np.ravel(cts), np.ravel(np.asarray(ints, dtype=object)), strict=True)
        ]
        return np.array(flat, dtype=object).reshape(np.shape(cts))

    def rerandomize(self, cts: np.ndarray) -> np.ndarray:
        """Fresh randomness: the key owner cannot read the combination from the randomness."""
        flat = [self.public.rerandomize(c) for c in np.ravel(cts)]
        return np.array(flat, dtype=object).reshape(np.shape(cts))

    def to_wire(self, cts: np.ndarray) -> np.ndarray:
        return paillier.to_array(list(np.ravel(cts)), self.public.nbytes, np.shape(cts))

    def from_wire(self, array: np.ndarray) -> np.ndarray:
        array = np.asarray(array)
        return np.array(paillier.from_array(array), dtype=object).reshape(array.shape[:-1])

    def public_bytes(self) -> np.ndarray:
        return np.frombuffer(self.public.to_bytes(), dtype=np.uint8)


def make_cipher(mode: str, bits: int) -> PlainCipher:
    """A fresh key pair (``paillier``) or the identity cipher (``plaintext``)."""
    if mode == "plaintext":
        return PlainCipher()
    if mode == "paillier":
        private = paillier.generate_keys(bits)
        return PaillierCipher(private.public, private)
    raise ValueError(f"strategy.secure must be 'none', 'plaintext' or 'paillier', got {mode!r}")


def public_cipher(mode: str, public: np.ndarray) -> PlainCipher:
    """The other side's cipher from its public key bytes (operations only)."""
    if mode == "plaintext":
        return PlainCipher()
    return PaillierCipher(paillier.PublicKey.from_bytes(np.asarray(public).tobytes()))


def private_cipher(mode: str, p: int, q: int) -> PlainCipher:
    if mode == "plaintext":
        return PlainCipher()
    public = paillier.PublicKey(mpz(p) * mpz(q))
    return PaillierCipher(public, paillier.PrivateKey(public, mpz(p), mpz(q)))


# -- party side -----------------------------------------------------------------------------------
def party_encrypt(own: PlainCipher, g: np.ndarray) -> np.ndarray:
    """Step 1: ``[[G]]_m`` on the wire."""
    return own.to_wire(own.encrypt(encode(g)))


def party_forward(own: PlainCipher, wire: np.ndarray, g: np.ndarray, eps: np.ndarray):
    """Step 3: decrypt ``[[G W~^T + E_s]]``, remove ``G eps^T``: ``z + E_s`` on the wire."""
    y = own.decrypt(own.from_wire(wire))
    return ints_to_wire(y - encode(g).dot(encode(eps).T))


def party_backward(
    own: PlainCipher,
    server: PlainCipher,
    gradw: np.ndarray,
    delta: np.ndarray,
    eps: np.ndarray,
    noise: float,
    rng: np.random.Generator,
):
    """Step 6. Returns the two wire arrays, the mask r to keep, and the noise N (the caller
    updates ``eps <- eps - lr N`` after this batch)."""
    n = rng.normal(0.0, noise, size=eps.shape) if noise > 0 else np.zeros(eps.shape)
    m = own.decrypt(own.from_wire(gradw)) + np.rint(n * SCALE2).astype(np.int64).astype(object)
    d = server.from_wire(delta)  # [[delta]]_s, B x width
    r = mask((d.shape[0], eps.shape[1]))
    de = server.rerandomize(server.add(server.matmul(d, encode(eps)), r))
    return ints_to_wire(m), server.to_wire(de), r, n


def party_gradient(wire: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Step 8: ``dL/dg = delta W`` (float32)."""
    return decode2(ints_from_wire(wire) + r)


# -- server side ----------------------------------------------------------------------------------
def server_forward(party: PlainCipher, cts: np.ndarray, w_tilde: np.ndarray):
    """Step 2: ``[[G W~^T + E_s]]`` on the wire, and the mask E_s to keep."""
    y = party.matmul(cts, encode(w_tilde).T)
    e_s = mask(y.shape)
    return party.to_wire(party.rerandomize(party.add(y, e_s))), e_s


def server_z(wire: np.ndarray, e_s: np.ndarray) -> np.ndarray:
    """Step 4: ``z_m = g_m W_m^T``."""
    return decode2(ints_from_wire(wire) - e_s)


def server_backward(
    party: PlainCipher, own: PlainCipher, cts: np.ndarray, delta: np.ndarray, w_tilde: np.ndarray
):
    """Step 5: ``[[G^T delta + R]]_m`` (as width x e) and ``[[delta]]_s`` on the wire; keeps R
    and ``delta W~`` (step 7 needs the weights of the forward pass)."""
    d = encode(delta)
    gw = party.matmul(cts.T, d).T  # [[(G^T D)^T]] = [[D^T G]], width x e
    big_r = mask(gw.shape)
    gradw = party.to_wire(party.rerandomize(party.add(gw, big_r)))
    return gradw, own.to_wire(own.encrypt(d)), big_r, d.dot(encode(w_tilde))


def server_weight_gradient(wire: np.ndarray, big_r: np.ndarray) -> np.ndarray:
    """Step 7: ``dL/dW + N`` (the party's noise), width x e."""
    return decode2(ints_from_wire(wire) - big_r)


def server_embedding_gradient(own: PlainCipher, wire: np.ndarray, dw: np.ndarray) -> np.ndarray:
    """Step 7: ``delta W~ - (delta eps + r)`` on the wire."""
    return ints_to_wire(dw - own.decrypt(own.from_wire(wire)))


# -- the top model above the interactive layer ----------------------------------------------------
def head_step(server, zs: list[np.ndarray], y: np.ndarray) -> tuple[float, np.ndarray]:
    """One step of the top model above the interactive layer (its bias and head, with the
    configured optimiser); returns the loss and ``delta = dL/dz``."""
    model, task = server.model, server.task
    z = torch.tensor(np.sum(zs, axis=0), device=server.device, requires_grad=True)
    model.train()
    server.optimizer.zero_grad(set_to_none=True)
    out = model.head(z + model.interactive[0].bias)
    loss = task.loss(out, task.target(y).to(server.device))
    loss.backward()
    server.after_backward()
    server.optimizer.step()
    return float(loss.detach()), z.grad.cpu().numpy()


def head_evaluate(server, zs: list[np.ndarray], y: np.ndarray) -> tuple[float, float]:
    model, task = server.model, server.task
    model.eval()
    with torch.no_grad():
        z = torch.tensor(np.sum(zs, axis=0), device=server.device)
        out = model.head(z + model.interactive[0].bias)
        loss = float(task.loss(out, task.target(y).to(server.device)))
    model.train()
    return loss, score(task, out, y)
