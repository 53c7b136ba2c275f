"""DJN short-exponent randomness: ``h_s^alpha`` in place of Paillier's ``r^n``.

Damgard, Jurik, Nielsen 2010 ("A generalization of Paillier's public-key system with
applications to electronic voting", section 4.2): ``h_s = h^n mod n^2`` with ``h = -x^2 mod n``,
alpha uniform of ``ceil(k/2)`` bits for a k-bit n. Here x is hashed from n (SHAKE-256), so every
side derives the same base from the public key and nobody chooses it. ``h_s^alpha`` comes from a
fixed-base table (:func:`djn_table`): one multiplication per byte of alpha, ~15x cheaper than
``r^n`` at 2048 bits; the key owner, who knows p and q, uses the same table mod p^2 and mod q^2
(:func:`djn_crt_tables`, the same number by CRT, ~2x cheaper).

The assumption (DJN's), on which every ciphertext made with this randomness relies:
``h_s^alpha`` with such a short alpha is computationally indistinguishable from a uniform
element of ``<h_s>``, also for the key owner, who knows the factorisation. A ciphertext returned
to the key owner carries ``h^(gamma + alpha)`` where gamma depends on the coefficients the other
side applied; reading gamma back is a short-exponent discrete logarithm, whose best known attack
(van Oorschot-Wiener: Pohlig-Hellman on the smooth part, s bits, of the group order, then a
kangaroo walk) costs about ``2^((k/2 - s)/2)``, out of reach for k/2 = 1024. Alpha is uniform
modulo every small factor of the order, so the components a small-exponent attack could isolate
(such as the quadratic character mod p) are hidden too. That is also why the key owner's own
encryptions must use ``h_s`` too: with uniform ``r^n`` there, the components of Z_n^* that h
does not reach would show the parity of coefficient combinations. The keys are ``phe``'s (random
primes, not safe primes); the argument does not need h to have full order. Without the
assumption (``full`` randomness) the callers use ``r^n`` (:meth:`.PublicKey.obfuscator`) or the
key owner's CRT ``r^n`` (:meth:`.PrivateKey.obfuscator`): uniform, nothing beyond Paillier's.
"""

from __future__ import annotations

import hashlib
import secrets
from functools import lru_cache

import gmpy2
from gmpy2 import mpz

ONE = mpz(1)


def djn_exponent_bits(key_bits: int) -> int:
    """DJN's exponent length: ``ceil(k / 2)`` for a k-bit modulus."""
    return (key_bits + 1) // 2


def djn_base(n: mpz) -> mpz:
    """``h_s = h^n mod n^2`` with ``h = -x^2 mod n`` and x hashed from n (SHAKE-256): every side
    derives the same base from the public key, and nobody chooses it."""
    n = mpz(n)
    size = (int(n).bit_length() + 7) // 8 + 16
    seed = int(n).to_bytes(size, "big")
    for counter in range(1000):
        digest = hashlib.shake_256(b"vflfs-djn" + counter.to_bytes(4, "big") + seed).digest(size)
        x = mpz(int.from_bytes(digest, "big")) % n
        if x > 1 and gmpy2.gcd(x, n) == 1:
            return gmpy2.powmod((-x * x) % n, n, n * n)
    raise ValueError("no DJN base for this modulus")


def _powers(base: mpz, modulus: mpz, count: int) -> tuple[mpz, ...]:
    """``base^(d 256^t) mod modulus`` for ``d`` in 1..255 and t below ``count``, flat."""
    out: list[mpz] = []
    for _ in range(count):
        acc = base
        for _ in range(255):
            out.append(acc)
            acc = acc * base % modulus
        base = acc  # base^256
    return tuple(out)


def _alpha_bytes(n: mpz) -> int:
    return (djn_exponent_bits(int(n).bit_length()) + 7) // 8


@lru_cache(maxsize=8)
def djn_table(n: mpz) -> tuple[mpz, ...]:
    """``h_s^(d 256^t)`` for ``d`` in 1..255 and the ``ceil(ceil(k/2) / 8)`` bytes t of alpha
    (~17 MB and ~0.2 s at 2048 bits; cached per key, and inherited by forked workers)."""
    n = mpz(n)
    return _powers(djn_base(n), n * n, _alpha_bytes(n))


@lru_cache(maxsize=8)
def djn_crt_tables(p: mpz, q: mpz) -> tuple[tuple[mpz, ...], tuple[mpz, ...]]:
    """The key owner's :func:`djn_table` mod p^2 and mod q^2 (the same ~17 MB in all, ~0.1 s):
    products of half-size numbers, ~3.5x cheaper each."""
    p, q = mpz(p), mpz(q)
    n, count = p * q, _alpha_bytes(p * q)
    base = djn_base(n)
    return _powers(base % (p * p), p * p, count), _powers(base % (q * q), q * q, count)


def djn_alpha(n: mpz) -> bytes:
    """A fresh exponent alpha (CSPRNG), big-endian bytes read least significant first by
    :func:`djn_power`: uniform of ``8 ceil(ceil(k/2) / 8)`` bits."""
    return secrets.token_bytes(_alpha_bytes(n))


def djn_power(table: tuple[mpz, ...], alpha: bytes, modulus: mpz) -> mpz:
    """``h_s^alpha mod modulus`` from a table of :func:`_powers`: one multiplication per
    non-zero byte of alpha (byte t weighs 256^t)."""
    acc = ONE
    for t, d in enumerate(alpha):
        if d:
            acc = acc * table[255 * t + d - 1] % modulus
    return acc


def djn_obfuscator(n: mpz, n2: mpz) -> mpz:
    """``h_s^alpha``, alpha uniform of ``8 ceil(ceil(k/2) / 8)`` bits (CSPRNG): an n-th residue
    in ``<h_s>``, one multiplication per non-zero byte of alpha."""
    return djn_power(djn_table(n), djn_alpha(n), n2)
