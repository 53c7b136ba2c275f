"""The ciphers and slots of the secure interactive layer (:mod:`vflfs.ml.secure_layer`).

Fixed-point integers (``F`` fractional bits), statistical masks, the layer's ``SLOT``-bit slots
and two ciphers with one interface: :class:`PlainCipher` (``plaintext`` mode: identity
"encryption", the same integer protocol) and :class:`PaillierCipher` (raw Paillier from
:mod:`vflfs.ml.paillier`, with obfuscators made ahead of time and forked workers).
"""

from __future__ import annotations

from itertools import groupby

import numpy as np
from gmpy2 import mpz

from . import paillier
from .parallel import chunks, resolve_workers, shared, standing_map

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


def tail(rows: int, slots: int) -> tuple[int, int]:
    """Rows in the last row block, and how many of its column ciphertexts fold into one."""
    t = rows - (-(-rows // slots) - 1) * slots
    return t, slots // t


def fold_tail(cipher: PlainCipher, cts: np.ndarray, rows: int) -> np.ndarray:
    """Row-packed outputs (``nb x C``) as a flat array, the last block's C ciphertexts folded g
    to one when its t rows leave room (g = slots // t >= 2; Horner's rule with ``t SLOT``-bit
    shifts): fewer decryptions for the key owner (B = 64 at 21 slots: 32 -> 2). The slots keep
    their masked values; nothing else is revealed."""
    cts = np.asarray(cts, dtype=object)
    t, g = tail(rows, cipher.slots)
    if g < 2:
        return cts.ravel()
    last = list(cts[-1])
    folded = [cipher.pack(last[i : i + g], SLOT * t) for i in range(0, len(last), g)]
    return np.concatenate([cts[:-1].ravel(), _shaped(folded, (len(folded),))])


def unfold_tail(plain: np.ndarray, rows: int, cols: int, slots: int) -> np.ndarray:
    """The ``nb x C`` plaintexts of decrypted :func:`fold_tail` output."""
    plain = np.asarray(plain, dtype=object).ravel()
    t, g = tail(rows, slots)
    if g < 2:
        return plain.reshape(-1, cols)
    full = -(-rows // slots) - 1
    last: list[int] = []
    for m in plain[full * cols :]:
        last += paillier.unpack_plain(m, g, SLOT * t)
    out = np.zeros((full + 1, cols), dtype=object)
    out[:full] = plain[: full * cols].reshape(full, cols)
    out[full] = last[:cols]
    return out


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

    def pack(self, cts: list, width: int):
        """The plaintexts' slot packing (``width``-bit slots), on what this cipher holds."""
        return paillier.pack_plain(cts, width)

    def to_wire(self, cts: np.ndarray) -> np.ndarray:
        return ints_to_wire(cts, (SLOT * PLAIN_SLOTS) // 8 + 2)  # packed, signed

    def from_wire(self, array: np.ndarray) -> np.ndarray:
        return ints_from_wire(array)

    def public_bytes(self) -> np.ndarray:
        return np.zeros(0, np.uint8)


class PaillierCipher(PlainCipher):
    """Raw Paillier (:mod:`vflfs.ml.paillier`); with ``private`` the key owner's side too.

    ``randomness``: ``djn`` (every encryption and re-randomisation uses ``h_s^alpha`` of this
    key, :meth:`~vflfs.ml.paillier.PublicKey.djn_obfuscator`; the key owner's by CRT,
    :meth:`~vflfs.ml.paillier.PrivateKey.djn_obfuscator`) or ``full`` (``r^n``: the key
    owner's by CRT, the others' by a full powmod). The obfuscators come from this process's
    :class:`~vflfs.ml.paillier.ObfuscatorPool` for the key, which makes them while the process
    waits (``precompute``; ``False``: made on the spot). ``workers`` processes (this one and
    kept workers) share the products and encryptions once it is worth it
    (``min_parallel_s``; default: :func:`default_workers`), the obfuscators handed out from
    this process's pool with the tasks. The decryptions run on threads instead (``workers`` of
    them; default: every CPU), which need no fork: gmpy2 releases the interpreter lock in
    their ``powmod``s (:meth:`~vflfs.ml.paillier.PrivateKey.decrypt_many`)."""

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
            raise ValueError(f"secure.randomness must be djn or full, got {randomness!r}")
        self.public, self.private, self.randomness = public, private, randomness
        self.workers = resolve_workers(workers) if workers else default_workers()
        self.threads = resolve_workers(workers)  # for the decryptions
        self.slots = paillier.slots_per_plaintext(public.bits, SLOT)
        self._scale = (public.bits / 2048) ** 2  # per-operation cost relative to 2048 bits
        self.pool = obfuscator_pool(self, POOL_SIZE if precompute else 0)

    def __getstate__(self) -> dict:
        """Pickled for a kept worker (:func:`~vflfs.ml.parallel.standing_map`): everything
        but the obfuscator pool, whose stock this process hands out with the tasks."""
        return {k: v for k, v in self.__dict__.items() if k != "pool"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.pool = paillier.ObfuscatorPool(self.obfuscator, 0)

    def obfuscator(self):
        if self.randomness == "djn":  # the key owner's by CRT
            return (self.private or self.public).djn_obfuscator()
        return (self.private or self.public).obfuscator()

    def _map(self, fn, count: int, ms_each: float, per_worker: int = 4, **inputs) -> list:
        """``fn`` over index chunks of ``range(count)``, on the kept workers too when worth it
        (:func:`~vflfs.ml.parallel.standing_map`); flattened."""
        seconds = count * ms_each * self._scale / 1000
        workers = self.workers if seconds >= self.min_parallel_s else 1
        if workers > 1 and self.randomness == "djn":  # built here, inherited by new workers
            if self.private is not None:
                paillier.djn_crt_tables(self.private.p, self.private.q)
            else:
                paillier.djn_table(self.public.n)
        with self.pool.working():
            tasks = chunks(count, workers, per_worker)
            parts = standing_map(fn, tasks, workers, cipher=self, **inputs)
        return [x for part in parts for x in part]

    def encrypt(self, ints: np.ndarray) -> np.ndarray:
        flat = [int(v) for v in np.ravel(np.asarray(ints, dtype=object))]
        obf = self.pool.take(len(flat), make=False)  # the workers make what is missing
        out = self._map(_encrypt_task, len(flat), 1.0, values=flat, obf=obf)
        return _shaped(out, np.shape(ints))

    def decrypt(self, cts: np.ndarray) -> np.ndarray:
        """Plaintexts in [0, n) (masked slots are non-negative), on :attr:`threads` threads."""
        flat = list(np.ravel(cts))
        with self.pool.working():
            out = [int(m) for m in self.private.decrypt_many(flat, self.threads)]
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

    def pack(self, cts: list, width: int):
        return paillier.pack(self.public, cts, width)

    def to_wire(self, cts: np.ndarray) -> np.ndarray:
        return paillier.to_wire(np.ravel(cts), self.public.nbytes, np.shape(cts))

    def from_wire(self, array: np.ndarray) -> np.ndarray:
        array = np.asarray(array)
        return _shaped(paillier.ciphertexts(array), array.shape[:-1])

    def public_bytes(self) -> np.ndarray:
        return np.frombuffer(self.public.to_bytes(), dtype=np.uint8)


RANDOMNESS = ("djn", "full")
POOL_SIZE = 1024  # obfuscators kept per key: more than a step of B = 64 rows needs
MAX_POOLS = 16  # a server holds one per party and its own
_POOLS: dict[tuple, paillier.ObfuscatorPool] = {}


def default_workers() -> int:
    """Processes for the layer's products and encryptions when ``secure.workers`` is unset:
    every CPU (this process and kept workers, :func:`~vflfs.ml.parallel.standing_map`: forked
    once, so a step's several calls pay no fork each; on 2 cores a step of B = 64 at 2048 bits
    takes 0.46 s of wall time with two, 0.54 s with one). (Threads do not help there: a product
    mod n^2 takes ~4 us, about what handing the interpreter lock between threads costs; the
    decryptions' ``powmod``s run on threads.)"""
    return resolve_workers(None)


def obfuscator_pool(cipher: PaillierCipher, capacity: int) -> paillier.ObfuscatorPool:
    """This process's pool for the cipher's key and randomness (kept across protocol messages:
    a party rebuilds its ciphers per message); the last ``MAX_POOLS`` keys' pools are kept."""
    if not capacity:
        return paillier.ObfuscatorPool(cipher.obfuscator, 0)
    name = (int(cipher.public.n), cipher.randomness, cipher.private is not None)
    if name not in _POOLS:
        while len(_POOLS) >= MAX_POOLS:
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
    raise ValueError(f"secure.mode must be 'none', 'plaintext' or 'paillier', got {mode!r}")


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
