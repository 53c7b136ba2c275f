"""The fast Paillier primitives (ml/paillier/): DJN randomness, Straus products, slots, wire
codec, obfuscator pool."""

from __future__ import annotations

import random
import time

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


def test_owner_djn_obfuscator_by_crt_is_the_public_one(key):
    """The key owner's CRT tables give h_s^alpha bit for bit as the public table does, for
    the same alpha; fresh ones are n-th residues (encryptions of 0) and differ."""
    p_table, q_table = paillier.djn_crt_tables(key.p, key.q)
    assert p_table[0] == paillier.djn_base(key.public.n) % key.psquare
    assert len(q_table) == len(paillier.djn_table(key.public.n))
    for _ in range(5):
        alpha = paillier.djn_alpha(key.public.n)
        assert key.djn_obfuscator(alpha) == key.public.djn_obfuscator(alpha)
    alpha = bytes([0, 7] + [0] * (len(alpha) - 2))  # 7 * 256
    assert key.djn_obfuscator(alpha) == pow(paillier.djn_base(key.public.n), 7 * 256, key.public.n2)
    fresh = {key.djn_obfuscator() for _ in range(20)}
    assert len(fresh) == 20 and all(key.decrypt(o) == 0 for o in fresh)


@pytest.mark.parametrize("method", ["naf", "fixed", "buckets"])
@pytest.mark.parametrize("bits", [1, 22, 64])
def test_multi_exp_equals_combine(key, bits, method):
    """Straus' products with signed coefficients give exactly the ciphertexts of ``combine``,
    by every method."""
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
    plan = paillier.Plan.of(coeffs, method=method)
    assert plan.method == method and plan.inverse[2] is False
    assert plan.inverse[3] is (method == "naf" and bits > 1)  # wNAF digits are signed
    out = plan.run(public, bases)
    assert plan.run(public, bases, [4, 1]) == [out[4], out[1]]
    for k, c in enumerate(out):
        column = [int(v) for v in coeffs[:, k]]
        assert c == public.combine(bases, column)
        assert key.decrypt_signed(c) == sum(a * v for a, v in zip(column, values, strict=True))


def test_multi_exp_without_bases(key):
    out = paillier.multi_exp(key.public, [], np.zeros((0, 3), dtype=object))
    assert [key.decrypt(c) for c in out] == [0, 0, 0]


def test_cost_model_picks_buckets_for_many_bases_and_naf_for_many_outputs():
    assert paillier.multiexp.choose(1440, 1, 16)[1] == "buckets"  # F-statistic class sums
    assert paillier.multiexp.choose(16, 32, 22)[1] == "naf"  # secure layer, one row block
    assert paillier.multiexp.choose(64, 32, 18)[1] == "naf"  # its weight gradient
    assert paillier.Plan.of([[1, 2], [3, 4]], buckets=False).method in ("naf", "fixed")


def test_naf_digits_are_sparse_odd_and_exact():
    """wNAF: odd digits below 2^(w-1) in magnitude, at most one in any w consecutive bits, and
    they sum back to the exponent."""
    draw = random.Random(5)
    for w in (2, 3, 5, 8):
        for a in [0, 1, 2**22 - 1, *(draw.getrandbits(64) for _ in range(50))]:
            digits = paillier.multiexp._naf(a, w)
            assert sum(d << pos for pos, d in digits) == a
            assert all(d % 2 and abs(d) < 1 << (w - 1) for _, d in digits)
            positions = [pos for pos, _ in digits]
            assert all(b - a_ >= w for a_, b in zip(positions, positions[1:], strict=False))


def test_keys_are_phe_keys(key):
    from phe import paillier as phe

    assert isinstance(key.public, phe.PaillierPublicKey)
    assert isinstance(key, phe.PaillierPrivateKey)
    c = key.encrypt(31337)
    assert key.raw_decrypt(int(c)) == 31337 == key.decrypt(c)  # phe's own CRT decryption
    assert key.decrypt(key.public.raw_encrypt(5)) == 5


def test_decrypt_many_on_threads_equals_phes_decryption(key):
    """The batched CRT decryption gives phe's plaintexts on any number of threads, also in a
    forked child (whose thread pool is its own)."""
    import os

    values = [random.randrange(int(key.public.n)) for _ in range(7)]
    cts = [key.public.raw_encrypt(v) for v in values]
    for threads in (1, 2, 3, 4, 16):
        assert key.decrypt_many(cts, threads) == values
    assert key.decrypt_many([], 2) == []
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit code
        os._exit(0 if key.decrypt_many(cts, 2) == values else 1)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    if done[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("decrypt_many never returned in a forked child")
    assert os.waitstatus_to_exitcode(done[1]) == 0


def test_wire_codec_is_fixed_width_and_signed_when_asked(key):
    cts = [key.encrypt(v) for v in (1, 2, 3, 4)]
    wire = paillier.to_wire(cts, key.public.nbytes, (2, 2))
    assert wire.shape == (2, 2, 128) and wire.dtype == np.uint8
    assert paillier.ciphertexts(wire) == cts
    values = np.array([[-(2**90), 5], [0, 2**100]], dtype=object)
    back = paillier.from_wire(paillier.to_wire(values.ravel(), 16, (2, 2), signed=True), True)
    np.testing.assert_array_equal(back, values)
    assert paillier.from_wire(paillier.int_bytes(2**70 + 3).reshape(1, -1))[0] == 2**70 + 3


def test_slot_packer_round_trips_signed_values_and_homomorphic_packing(key):
    ints = np.array([[-5, 7], [3, -1], [0, 2]], dtype=object)
    packed = paillier.pack_columns(ints, 2, 20, offset=1 << 10)
    assert packed.shape == (2, 2)
    np.testing.assert_array_equal(paillier.unpack_columns(packed, 3, 2, 20, 1 << 10), ints)
    cts = [key.encrypt(v) for v in (3, 0, 9)]
    assert key.decrypt(paillier.pack(key.public, cts, 20)) == paillier.pack_plain([3, 0, 9], 20)


def test_obfuscator_pool_hands_each_obfuscator_out_once(key):
    pool = paillier.ObfuscatorPool(key.public.djn_obfuscator, 8, background=False)
    assert pool.fill() == 8 and len(pool) == 8
    first = pool.take(5)
    assert len(pool) == 3 and len(pool.take(5, make=False)) == 3 and len(pool) == 0
    more = pool.take(4)  # made on the spot
    assert len(set(first + more)) == 9 and all(key.decrypt(o) == 0 for o in first + more)
    background = paillier.ObfuscatorPool(key.public.djn_obfuscator, 4)
    with background.working():
        pass
    for _ in range(500):  # the thread fills the stock by itself
        if len(background) == 4:
            break
        time.sleep(0.01)
    assert len(background) == 4
    background.close()
