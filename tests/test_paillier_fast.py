"""The fast Paillier primitives of the secure interactive layer: DJN randomness, Straus products."""

from __future__ import annotations

import random

import numpy as np
import pytest
from gmpy2 import mpz

from vflfs.ml import paillier


@pytest.fixture(scope="module")
def key() -> paillier.PrivateKey:
    return paillier.generate_keys(512)


def test_djn_base_is_derived_from_the_key(key):
    """Everyone derives the same n-th residue h_s from n; another key gives another base."""
    public = key.public
    h_s = paillier.djn_base(public.n)
    assert h_s == paillier.djn_base(mpz(int(public.n)))
    assert h_s != paillier.djn_base(paillier.generate_keys(512).public.n)
    assert key.decrypt(h_s) == 0  # an encryption of 0: an n-th residue
    table = paillier.djn_table(public.n)
    assert len(table) == 255 * paillier.djn_exponent_bits(public.bits) // 8
    assert table[0] == h_s and table[255] == pow(h_s, 256, public.n2)
    assert table[255 + 6] == pow(h_s, 7 * 256, public.n2)


def test_djn_obfuscators_decrypt_and_differ(key):
    """Ciphertexts under DJN randomness decrypt to their plaintext; re-randomised ones differ from
    the original and from each other but still decrypt the same."""
    public = key.public
    obfuscators = {public.djn_obfuscator() for _ in range(50)}
    assert len(obfuscators) == 50 and mpz(1) not in obfuscators
    m = 123456789
    c = public.plain(m) * public.djn_obfuscator() % public.n2
    again = [c * public.djn_obfuscator() % public.n2 for _ in range(3)]
    assert key.decrypt(c) == m
    assert all(key.decrypt(a) == m for a in again)
    assert len({c, *again}) == 4
    assert key.decrypt_signed(public.plain(-5) * public.djn_obfuscator() % public.n2) == -5


@pytest.mark.parametrize("bits", [1, 22, 64])
def test_multi_exp_equals_combine(key, bits):
    """Straus' products with signed coefficients give exactly the ciphertexts of ``combine``."""
    public = key.public
    rng = np.random.default_rng(bits)
    values = [int(v) for v in rng.integers(-1000, 1000, size=7)]
    bases = [key.encrypt(v) for v in values]
    draw = random.Random(bits)
    coeffs = np.array(
        [[draw.randrange(-(1 << bits) + 1, 1 << bits) for _ in range(5)] for _ in range(7)],
        dtype=object,
    )
    coeffs[2, :] = 0  # a base no column uses
    coeffs[3, :] = np.abs(coeffs[3, :])  # a base without negative coefficients
    windows, plan, negative = paillier.exp_plan(coeffs)
    assert negative[3] is False
    tables = paillier.power_tables(public, bases, negative)
    out = paillier.multi_exp(public, tables, windows, plan)
    for k, c in enumerate(out):
        column = [int(v) for v in coeffs[:, k]]
        assert c == public.combine(bases, column)
        assert key.decrypt_signed(c) == sum(a * v for a, v in zip(column, values, strict=True))


def test_multi_exp_without_bases(key):
    windows, plan, negative = paillier.exp_plan(np.zeros((0, 3), dtype=object))
    out = paillier.multi_exp(key.public, [], windows, plan)
    assert [key.decrypt(c) for c in out] == [0, 0, 0]
