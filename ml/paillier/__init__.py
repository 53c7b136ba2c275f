"""Paillier for vflfs's secure phases: one module for keys, randomness, products, slots, wire.

Users: the secure Gini (:mod:`vflfs.ml.gini_secure`), the secure F-statistic
(:mod:`vflfs.ml.fstat_secure`) and the secure interactive layer (:mod:`vflfs.ml.secure_layer`).

- :mod:`.keys`: ``phe``'s key types, raw gmpy2 ciphertext arithmetic, CRT decryption and the
  key owner's CRT obfuscators;
- :mod:`.djn`: DJN short-exponent randomness ``h_s^alpha`` (the key owner's by CRT) and the
  assumption it rests on;
- :mod:`.multiexp`: the one multi-exponentiation (Straus, with wNAF or window tables, or
  buckets);
- :mod:`.slots`: the one slot packer (several values per plaintext);
- :mod:`.wire`: the one wire codec (fixed-width bytes, 512 B per ciphertext at 2048 bits);
- :mod:`.pool`: obfuscators made ahead of time;
- :func:`random_bits`: statistical masks. A value v < 2^b masked by r uniform in
  ``[0, 2^(b + s))`` is within statistical distance ``2^-s`` of r alone (the masked value is
  uniform on a range that differs from r's by at most v < 2^b of its 2^(b + s) points); the
  callers take s = 40: Gini and F-statistic (``mask_bits``, b the bits of a count or class
  sum), the secure layer (96-bit masks over products below 2^(2F + 16), F = 20).
"""

from __future__ import annotations

import secrets

from .djn import djn_alpha, djn_base, djn_crt_tables, djn_exponent_bits, djn_table
from .keys import ONE, PrivateKey, PublicKey, generate_keys, owner_encrypt, rerandomize
from .multiexp import Plan, multi_exp, power_product
from .pool import ObfuscatorPool
from .slots import (
    pack,
    pack_columns,
    pack_plain,
    slots_per_plaintext,
    unpack_columns,
    unpack_plain,
)
from .wire import ciphertexts, from_wire, int_bytes, to_wire


def random_bits(bits: int) -> int:
    """A uniform integer in [0, 2^bits) from the CSPRNG (a statistical mask)."""
    return secrets.randbits(bits)


__all__ = [
    "ONE",
    "ObfuscatorPool",
    "Plan",
    "PrivateKey",
    "PublicKey",
    "ciphertexts",
    "djn_alpha",
    "djn_base",
    "djn_crt_tables",
    "djn_exponent_bits",
    "djn_table",
    "from_wire",
    "generate_keys",
    "int_bytes",
    "multi_exp",
    "owner_encrypt",
    "pack",
    "pack_columns",
    "pack_plain",
    "power_product",
    "random_bits",
    "rerandomize",
    "slots_per_plaintext",
    "to_wire",
    "unpack_columns",
    "unpack_plain",
]
