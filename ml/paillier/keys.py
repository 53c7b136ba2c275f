"""Paillier keys: ``phe``'s key types with raw gmpy2 arithmetic on the ciphertexts.

Paillier (1999) with g = n + 1: Enc(m) = (1 + m n) r^n mod n^2. :class:`PublicKey` and
:class:`PrivateKey` are ``phe.PaillierPublicKey`` / ``phe.PaillierPrivateKey`` (keys from
``phe``'s generator, primes from the system's CSPRNG), so every ciphertext here is a raw ``phe``
ciphertext and ``phe``'s own methods (``raw_encrypt``, ``raw_decrypt``) work on these keys.
``encrypt`` and ``decrypt`` here take and give raw integers mod n: ``phe``'s encoding layer is
deliberately not used, its float exponent travels in the clear (spec section 4). The arithmetic
keeps its integers as ``mpz`` (no conversion per operation).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import gmpy2
from gmpy2 import mpz
from phe import paillier as phe

from ..parallel import thread_map
from .djn import djn_alpha, djn_crt_tables, djn_obfuscator, djn_power, djn_table
from .multiexp import power_product

ONE = mpz(1)


class PublicKey(phe.PaillierPublicKey):
    """The public key n; also the ciphertext arithmetic anyone may do."""

    def __init__(self, n: int) -> None:
        super().__init__(mpz(n))
        self.n2 = self.nsquare  # mpz
        self.nbytes = 2 * ((int(self.n).bit_length() + 7) // 8)  # bytes of one ciphertext

    @property
    def bits(self) -> int:
        return int(self.n).bit_length()

    def plain(self, m: int) -> mpz:
        """g^m = 1 + m n mod n^2: an encryption of m without randomness (only inside others)."""
        return (ONE + (mpz(m) % self.n) * self.n) % self.n2

    def obfuscator(self) -> mpz:
        """A fresh r^n mod n^2, r uniform in Z_n^* (CSPRNG): Paillier's own randomness."""
        r = mpz(secrets.randbelow(int(self.n) - 1) + 1)
        return gmpy2.powmod(r, self.n, self.n2)

    def djn_obfuscator(self, alpha: bytes | None = None) -> mpz:
        """``h_s^alpha``: DJN's short-exponent randomness (:mod:`.djn`, and its assumption);
        alpha fresh unless given (:func:`.djn.djn_alpha`)."""
        if alpha is None:
            return djn_obfuscator(self.n, self.n2)
        return djn_power(djn_table(self.n), alpha, self.n2)

    def encrypt(self, m: int) -> mpz:  # type: ignore[override]
        """A raw ciphertext of the integer m (fresh r^n)."""
        return self.plain(m) * self.obfuscator() % self.n2

    def rerandomize(self, c: mpz) -> mpz:
        """The same plaintext under fresh r^n: nobody can tell where it came from."""
        return c * self.obfuscator() % self.n2

    def product(self, cts: Sequence[mpz]) -> mpz:
        """Enc(sum of the plaintexts): additions only."""
        acc, n2 = ONE, self.n2
        for c in cts:
            acc = acc * c % n2
        return acc

    def combine(self, cts: Sequence[mpz], coeffs: Sequence[int], const: int = 0) -> mpz:
        """Enc(sum_j coeffs[j] m_j + const) for signed integer coefficients."""
        out = power_product(self, cts, coeffs)
        return out * self.plain(const) % self.n2 if const else out

    def to_bytes(self) -> bytes:
        return int(self.n).to_bytes((self.bits + 7) // 8, "big")

    @classmethod
    def from_bytes(cls, data: bytes) -> PublicKey:
        return cls(mpz(int.from_bytes(bytes(data), "big")))


class PrivateKey(phe.PaillierPrivateKey):
    """The key owner's key: CRT obfuscators and CRT decryption (``phe``'s ``raw_decrypt``:
    p and q apart, with the precomputed hp and hq)."""

    def __init__(self, public: PublicKey, p: int, q: int) -> None:
        super().__init__(public, mpz(p), mpz(q))  # phe orders p < q, computes hp, hq, p^-1
        self.p, self.q = mpz(self.p), mpz(self.q)
        self.psquare, self.qsquare = self.p * self.p, self.q * self.q
        self.hp, self.hq, self.p_inverse = mpz(self.hp), mpz(self.hq), mpz(self.p_inverse)
        self._p2_inverse = gmpy2.invert(self.psquare, self.qsquare)

    @property
    def public(self) -> PublicKey:
        return self.public_key

    def obfuscator(self) -> mpz:
        """A fresh uniform n-th residue mod n^2 (the law of r^n), by CRT: r^n mod p^2 depends
        only on r mod p and is uniform on the order-(p - 1) subgroup of Z_{p^2}^*, which is
        {x^p : x in Z_{p^2}^*}; so x^p mod p^2 (a 1024-bit exponent on a 2048-bit modulus at
        2048-bit keys) has the same law, ~3.5x cheaper than r^n mod n^2."""
        p2, q2 = self.psquare, self.qsquare
        a = gmpy2.powmod(mpz(secrets.randbelow(int(p2) - 1) + 1), self.p, p2)
        b = gmpy2.powmod(mpz(secrets.randbelow(int(q2) - 1) + 1), self.q, q2)
        return a + p2 * ((b - a) * self._p2_inverse % q2)

    def djn_obfuscator(self, alpha: bytes | None = None) -> mpz:
        """The public key's ``h_s^alpha`` (:meth:`PublicKey.djn_obfuscator`, the same law and,
        for the same alpha, the same number) by CRT: ``h_s^alpha`` mod p^2 and mod q^2 from
        the owner's tables (:func:`.djn.djn_crt_tables`), ~2x cheaper than mod n^2."""
        alpha = djn_alpha(self.public.n) if alpha is None else alpha
        p2, q2 = self.psquare, self.qsquare
        tp, tq = djn_crt_tables(self.p, self.q)
        a, b = djn_power(tp, alpha, p2), djn_power(tq, alpha, q2)
        return a + p2 * ((b - a) * self._p2_inverse % q2)

    def encrypt(self, m: int) -> mpz:
        """A raw ciphertext of the integer m (fresh CRT randomness)."""
        return self.public.plain(m) * self.obfuscator() % self.public.n2

    def decrypt(self, c: mpz) -> mpz:  # type: ignore[override]
        """The plaintext in [0, n) of a raw ciphertext (CRT, as ``phe``'s ``raw_decrypt``)."""
        p, q = self.p, self.q
        mp = (gmpy2.powmod(c, p - 1, self.psquare) - 1) // p * self.hp % p
        mq = (gmpy2.powmod(c, q - 1, self.qsquare) - 1) // q * self.hq % q
        return mp + p * ((mq - mp) * self.p_inverse % q)

    def decrypt_below_p(self, c: mpz) -> mpz:
        """The plaintext of a ciphertext whose plaintext the caller knows to be below p (the
        smaller prime): m mod p, from the half of :meth:`decrypt` mod p^2 (half the work)."""
        p = self.p
        return (gmpy2.powmod(c, p - 1, self.psquare) - 1) // p * self.hp % p

    def decrypt_many(self, cts: Sequence[mpz], threads: int = 1) -> list[mpz]:
        """:meth:`decrypt` of each ciphertext, the ``powmod``s on ``threads`` threads.

        The ``powmod``s (one exponent, many bases: ``p - 1`` mod p^2 and ``q - 1`` mod q^2,
        equal work) run on :func:`~vflfs.ml.parallel.thread_map`'s threads, gmpy2 releasing
        the interpreter lock; the CRT recombination is cheap and stays here."""
        cts = list(cts)
        p, q = self.p, self.q
        parts = max(1, min(threads, 2 * len(cts)))
        cut = max(1, -(-len(cts) // max(1, parts // 2)))  # rows per task (two primes each)
        tasks = [
            (cts[i : i + cut], e, m)
            for i in range(0, len(cts), cut)
            for e, m in ((p - 1, self.psquare), (q - 1, self.qsquare))
        ]
        powers = thread_map(_powmods, tasks, parts)
        out: list[mpz] = []
        for xp, xq in zip(powers[::2], powers[1::2], strict=True):
            for a, b in zip(xp, xq, strict=True):
                mp = (a - 1) // p * self.hp % p
                mq = (b - 1) // q * self.hq % q
                out.append(mp + p * ((mq - mp) * self.p_inverse % q))
        return out

    def decrypt_signed(self, c: mpz) -> int:
        """The plaintext as a signed integer in (-n/2, n/2)."""
        m, n = int(self.decrypt(c)), int(self.public.n)
        return m - n if m > n // 2 else m


def _powmods(task: tuple) -> list[mpz]:
    """``b^e mod m`` for every base b, the interpreter lock released meanwhile."""
    bases, e, m = task
    return gmpy2.powmod_base_list(bases, e, m) if bases else []


def generate_keys(bits: int = 2048) -> PrivateKey:
    """A fresh key pair of ``bits`` bits (``phe``'s generator, SystemRandom primes)."""
    if bits < 256 or bits % 8:
        raise ValueError(f"Paillier key size must be a multiple of 8 and >= 256, got {bits}")
    public, private = phe.generate_paillier_keypair(n_length=bits)
    return PrivateKey(PublicKey(public.n), private.p, private.q)


def owner_encrypt(key: PrivateKey, m: int, djn: bool) -> mpz:
    """The key owner's encryption: DJN ``h_s^alpha`` randomness (by CRT, ~1.3x cheaper than
    the public key's), or CRT ``r^n``."""
    if djn:
        return key.public.plain(m) * key.djn_obfuscator() % key.public.n2
    return key.encrypt(m)


def rerandomize(key: PublicKey, c: mpz, djn: bool) -> mpz:
    """A non-owner's re-randomisation: times DJN ``h_s^alpha``, or ``r^n``."""
    return c * (key.djn_obfuscator() if djn else key.obfuscator()) % key.n2
