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

from itertools import groupby

import numpy as np
from gmpy2 import mpz

from . import paillier
from .parallel import chunks, fork_map, resolve_workers, shared

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
    """Uniform statistical masks in [0, 2^MASK_BITS) (CSPRNG). A masked value y + mask with
    |y| < 2^(2F + 16) (a product of fixed-point values below 2^16 in magnitude, plus ``OFFSET``
    inside a slot) is within statistical distance 2^-40 of the mask alone (56 - 16 bits)."""
    size = int(np.prod(shape))
    flat = [paillier.random_bits(MASK_BITS) for _ in range(size)]
    return np.array(flat, dtype=object).reshape(shape)


def ints_to_wire(ints: np.ndarray, width: int = WIRE) -> np.ndarray:
    """Signed integers as ``uint8`` of shape ``ints.shape + (width,)``."""
    flat = np.asarray(ints, dtype=object).ravel()
    return paillier.to_wire(flat, width, np.shape(ints), signed=True)


def ints_from_wire(array: np.ndarray) -> np.ndarray:
    return paillier.from_wire(array, signed=True)


# -- slots: several fixed-point values in one plaintext -------------------------------------------
SLOT = MASK_BITS + 1  # bits per slot: a masked value y + OFFSET + mask lies in [0, 2^SLOT)
OFFSET = 1 << (MASK_BITS - 1)  # makes every masked slot non-negative (|y| < 2^(MASK_BITS - 1))
PLAIN_SLOTS = (2048 - 1) // SLOT  # plaintext mode packs as a 2048-bit key would


def pack_rows(ints: np.ndarray, slots: int, offset: int = 0) -> np.ndarray:
    """``R x C`` integers as ``ceil(R / slots) x C`` plaintexts of ``SLOT``-bit slots: row
    ``b slots + t`` goes to slot t of block b (plus ``offset``). Signed values are fine: the
    packing is an exact integer sum."""
    return paillier.pack_columns(ints, slots, SLOT, offset)


def unpack_rows(packed: np.ndarray, rows: int, slots: int) -> np.ndarray:
    """The first ``rows`` rows of packed masked values, ``OFFSET`` removed."""
    return paillier.unpack_columns(packed, rows, slots, SLOT, OFFSET)


# -- ciphers: identity (plaintext mode) or Paillier ---------------------------------------------
class PlainCipher:
    """``plaintext`` mode: the same protocol with identity encryption (integers in the clear)."""

    kind = "plaintext"
    slots = PLAIN_SLOTS

    def encrypt(self, ints: np.ndarray) -> np.ndarray:
        return np.array(ints, dtype=object)

    def decrypt(self, cts: np.ndarray) -> np.ndarray:
        return np.array(cts, dtype=object)

    def affine(self, cts: np.ndarray, coeffs: np.ndarray, ints: np.ndarray) -> np.ndarray:
        """Enc(M C + A) from Enc(M), plain integers C and A, re-randomised."""
        cts, coeffs = np.asarray(cts, dtype=object), np.asarray(coeffs, dtype=object)
        out = np.zeros((cts.shape[0], coeffs.shape[1]), dtype=object)
        if cts.shape[1]:
            out += cts.dot(coeffs)
        return out + np.asarray(ints, dtype=object)

    def to_wire(self, cts: np.ndarray) -> np.ndarray:
        return ints_to_wire(cts, (SLOT * PLAIN_SLOTS) // 8 + 2)  # packed, signed

    def from_wire(self, array: np.ndarray) -> np.ndarray:
        return ints_from_wire(array)

    def public_bytes(self) -> np.ndarray:
        return np.zeros(0, np.uint8)


class PaillierCipher(PlainCipher):
    """Raw Paillier (:mod:`vflfs.ml.paillier`); with ``private`` the key owner's side too.

    ``randomness``: ``djn`` (every encryption and re-randomisation uses ``h_s^alpha`` of this
    key, :meth:`~vflfs.ml.paillier.PublicKey.djn_obfuscator`) or ``full`` (``r^n``: the key
    owner's by CRT, the others' by a full powmod). The obfuscators come from this process's
    :class:`~vflfs.ml.paillier.ObfuscatorPool` for the key, which makes them while the process
    waits (``precompute``; ``False``: made on the spot). ``workers`` forked processes share the
    work once it is worth a fork (``min_parallel_s``); default: :func:`default_workers`."""

    kind = "paillier"
    min_parallel_s = 0.05

    def __init__(
        self,
        public,
        private=None,
        workers: int | None = None,
        randomness: str = "djn",
        precompute: bool = True,
    ):
        if randomness not in RANDOMNESS:
            raise ValueError(f"strategy.secure_randomness must be djn or full, got {randomness!r}")
        self.public, self.private, self.randomness = public, private, randomness
        self.workers = resolve_workers(workers) if workers else default_workers()
        self.slots = paillier.slots_per_plaintext(public.bits, SLOT)
        self._scale = (public.bits / 2048) ** 2  # per-operation cost relative to 2048 bits
        self.pool = obfuscator_pool(self, POOL_SIZE if precompute else 0)

    def obfuscator(self):
        if self.randomness == "djn":
            return self.public.djn_obfuscator()
        return (self.private or self.public).obfuscator()

    def _map(self, fn, count: int, ms_each: float, per_worker: int = 4, **inputs) -> list:
        """``fn`` over index chunks of ``range(count)``, forked when worth it; flattened."""
        seconds = count * ms_each * self._scale / 1000
        workers = self.workers if seconds >= self.min_parallel_s else 1
        if workers > 1 and self.randomness == "djn":
            paillier.djn_table(self.public.n)  # built once here, inherited by the workers
        with self.pool.working():
            tasks = chunks(count, workers, per_worker)
            parts = fork_map(fn, tasks, workers, cipher=self, **inputs)
        return [x for part in parts for x in part]

    def encrypt(self, ints: np.ndarray) -> np.ndarray:
        flat = [int(v) for v in np.ravel(np.asarray(ints, dtype=object))]
        obf = self.pool.take(len(flat), make=False)  # the workers make what is missing
        out = self._map(_encrypt_task, len(flat), 1.0, values=flat, obf=obf)
        return _shaped(out, np.shape(ints))

    def decrypt(self, cts: np.ndarray) -> np.ndarray:
        """Plaintexts in [0, n) (masked slots are non-negative)."""
        flat = list(np.ravel(cts))
        out = self._map(_decrypt_task, len(flat), 2.4, cts=flat)
        return _shaped(out, np.shape(cts))

    def affine(self, cts: np.ndarray, coeffs: np.ndarray, ints: np.ndarray) -> np.ndarray:
        """Enc(M C + A) from Enc(M), plain integers C and A, re-randomised."""
        cts = np.asarray(cts, dtype=object)
        rows, cols = cts.shape[0], np.shape(coeffs)[1]
        ms = 0.1 + 0.04 * cts.shape[1]
        out = self._map(
            _affine_task,
            rows * cols,
            ms,
            per_worker=1,
            cts=[list(r) for r in cts],
            plan=paillier.Plan.of(coeffs),
            adds=[[int(v) for v in r] for r in np.asarray(ints, dtype=object)],
            obf=self.pool.take(rows * cols, make=False),
        )
        return _shaped(out, (rows, cols))

    def to_wire(self, cts: np.ndarray) -> np.ndarray:
        return paillier.to_wire(np.ravel(cts), self.public.nbytes, np.shape(cts))

    def from_wire(self, array: np.ndarray) -> np.ndarray:
        array = np.asarray(array)
        return _shaped(paillier.ciphertexts(array), array.shape[:-1])

    def public_bytes(self) -> np.ndarray:
        return np.frombuffer(self.public.to_bytes(), dtype=np.uint8)


RANDOMNESS = ("djn", "full")
POOL_SIZE = 1024  # obfuscators kept per key: more than a step of B = 64 rows needs
_POOLS: dict[tuple, paillier.ObfuscatorPool] = {}


def default_workers() -> int:
    """Processes for the layer's Paillier work when ``secure_workers`` is unset: one on up to
    two CPUs (each call forks its workers, ~15-25 ms, and a step makes eight calls: measured,
    two workers were slower than one on two cores), otherwise every CPU but one."""
    cpus = resolve_workers(None)
    return 1 if cpus <= 2 else cpus - 1


def obfuscator_pool(cipher: PaillierCipher, capacity: int) -> paillier.ObfuscatorPool:
    """This process's pool for the cipher's key and randomness (kept across protocol messages:
    a party rebuilds its ciphers per message); the last four keys' pools are kept."""
    if not capacity:
        return paillier.ObfuscatorPool(cipher.obfuscator, 0)
    name = (int(cipher.public.n), cipher.randomness, cipher.private is not None)
    if name not in _POOLS:
        while len(_POOLS) >= 4:
            _POOLS.pop(next(iter(_POOLS))).close()
        _POOLS[name] = paillier.ObfuscatorPool(cipher.obfuscator, capacity)
    return _POOLS[name]


def _shaped(flat: list, shape: tuple) -> np.ndarray:
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(shape)


def _fresh(cipher: PaillierCipher, obf: list, i: int):
    """Obfuscator i: the pool's if it had one, else made now."""
    return obf[i] if i < len(obf) else cipher.obfuscator()


def _encrypt_task(index: np.ndarray) -> list:
    cipher, values, obf = shared()["cipher"], shared()["values"], shared()["obf"]
    key = cipher.public
    return [key.plain(values[i]) * _fresh(cipher, obf, i) % key.n2 for i in index]


def _decrypt_task(index: np.ndarray) -> list:
    cipher, cts = shared()["cipher"], shared()["cts"]
    return [int(cipher.private.decrypt(cts[i])) for i in index]


def _affine_task(index: np.ndarray) -> list:
    """Outputs ``index`` (row-major) of Enc(M C + A): per row, Straus' products of its
    ciphertexts (tables once per row), then the addition and a fresh obfuscator."""
    s = shared()
    cipher, cts, adds, plan, obf = s["cipher"], s["cts"], s["adds"], s["plan"], s["obf"]
    key = cipher.public
    cols, n2, out = len(plan.columns), key.n2, []
    for r, items in groupby(index.tolist(), key=lambda i: i // cols):
        ks = [i % cols for i in items]
        products = plan.run(key, cts[r], ks)
        for c, k in zip(products, ks, strict=True):
            out.append(c * key.plain(adds[r][k]) % n2 * _fresh(cipher, obf, r * cols + k) % n2)
    return out


def make_cipher(mode: str, bits: int, workers: int | None = None, randomness: str = "djn"):
    """A fresh key pair (``paillier``) or the identity cipher (``plaintext``)."""
    if mode == "plaintext":
        return PlainCipher()
    if mode == "paillier":
        private = paillier.generate_keys(bits)
        return PaillierCipher(private.public, private, workers, randomness)
    raise ValueError(f"strategy.secure must be 'none', 'plaintext' or 'paillier', got {mode!r}")


def public_cipher(mode: str, public: np.ndarray, workers=None, randomness: str = "djn"):
    """The other side's cipher from its public key bytes (operations only)."""
    if mode == "plaintext":
        return PlainCipher()
    key = paillier.PublicKey.from_bytes(np.asarray(public).tobytes())
    return PaillierCipher(key, None, workers, randomness)


def private_cipher(mode: str, p: int, q: int, workers=None, randomness: str = "djn"):
    if mode == "plaintext":
        return PlainCipher()
    public = paillier.PublicKey(mpz(p) * mpz(q))
    return PaillierCipher(public, paillier.PrivateKey(public, mpz(p), mpz(q)), workers, randomness)


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
    y = unpack_rows(own.decrypt(own.from_wire(wire)), len(g), own.slots)
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
    return ints_to_wire(m), server.to_wire(de), r, n


def party_gradient(wire: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Step 8: ``dL/dg = delta W`` (float32)."""
    return decode2(ints_from_wire(wire) + r)


# -- server side ----------------------------------------------------------------------------------
def server_forward(party: PlainCipher, cts: np.ndarray, w_tilde: np.ndarray, rows: int):
    """Step 2: ``[[G W~^T + E_s]]`` (packed along rows) on the wire, and the mask E_s to keep."""
    e_s = mask((rows, w_tilde.shape[0]))
    y = party.affine(cts, encode(w_tilde).T, pack_rows(e_s, party.slots, OFFSET))
    return party.to_wire(y), e_s


def server_z(wire: np.ndarray, e_s: np.ndarray) -> np.ndarray:
    """Step 4: ``z_m = g_m W_m^T``."""
    return decode2(ints_from_wire(wire) - e_s)


def server_backward(
    party: PlainCipher, own: PlainCipher, cts_t: np.ndarray, delta: np.ndarray, w_tilde: np.ndarray
):
    """Step 5 from the column-packed ``[[G^T]]``: ``[[G^T delta + R^T]]_m`` (packed along G's
    columns) and ``[[delta]]_s`` (packed along rows) on the wire; keeps R (width x e) and
    ``delta W~`` (step 7 needs the weights of the forward pass)."""
    d = encode(delta)
    big_r = mask(w_tilde.shape)
    gw = party.affine(cts_t, d, pack_rows(big_r.T, party.slots, OFFSET))  # ce x width
    enc_d = own.encrypt(pack_rows(d, own.slots))
    return party.to_wire(gw), own.to_wire(enc_d), big_r, d.dot(encode(w_tilde))


def server_weight_gradient(wire: np.ndarray, big_r: np.ndarray) -> np.ndarray:
    """Step 7: ``dL/dW + N`` (the party's noise), width x e."""
    return decode2(ints_from_wire(wire) - big_r)


def server_embedding_gradient(own: PlainCipher, wire: np.ndarray, dw: np.ndarray) -> np.ndarray:
    """Step 7: ``delta W~ - (delta eps + r)`` on the wire."""
    de = unpack_rows(own.decrypt(own.from_wire(wire)), dw.shape[0], own.slots)
    return ints_to_wire(dw - de)
