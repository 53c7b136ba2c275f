"""The secure Gini's maths on their own (ml/gini_secure.py, ml/gini_product.py,
ml/gini_counts.py, ml/paillier): re-randomisation, the two-class products, the pair counts,
packing, and many classes, each exact against the plaintext fixed-point Gini."""

from __future__ import annotations

import numpy as np
import pytest
from phe import paillier as phe

from vflfs.ml import gini_counts as gp_counts
from vflfs.ml import gini_product as gp
from vflfs.ml import gini_secure as gs
from vflfs.ml import paillier
from vflfs.ml.gini import (
    GiniParams,
    bin_features,
    class_counts,
    fixed_weight,
    gini_fixed_point,
)

F = 52  # default weight_bits


@pytest.mark.parametrize("djn", [True, False])
def test_rerandomisation_hides_which_ciphertexts_were_summed(djn):
    key = paillier.generate_keys(512)
    y = np.array([0, 1, 1, 0, 1, 0, 0, 1, 2])
    params = GiniParams(2, 3, 9, F, 40, 512, djn)
    labels = gs.encrypt_labels(key, y, params, workers=1)
    columns, bins_of = [labels[0::2], labels[1::2]], np.array([0, 0, 1, 1, 1, 0, 1, 1, 0])
    totals = [key.public.product(col) for col in columns]
    masks = [5, 6, 7, 8, 9, 10]
    args = (bins_of, columns, totals, key.public, params, masks)
    first, second = gs.mask_feature(*args), gs.mask_feature(*args)
    sums = gp_counts.bin_sums(bins_of, columns, totals, key.public, 2)
    (counts, _), _ = gp_counts.split_counts(key.public, sums, 3)
    bare = paillier.pack(key.public, [c for row in counts for c in row], params.width)
    bare = bare * key.public.plain(paillier.pack_plain(masks, params.width)) % key.public.n2
    assert first[0] != second[0] and bare not in (first[0][0], second[0][0])
    assert key.decrypt(first[0][0]) == key.decrypt(second[0][0]) == key.decrypt(bare)
    assert first[1] == second[1]  # the kept term is the party's own, not re-randomised
    # step 4: the weighted sums the party returns are re-randomised too
    masked = gs.Masked([first[0]], [first[1]], np.asarray([first[2]]), djn)
    squares = gs.server_square(key, params, masked.packed, 1)
    again = [gs.party_combine(key.public, masked, squares, 1)[0] for _ in range(2)]
    bare_q = key.public.combine(squares[0], first[2]) * first[1] % key.public.n2
    assert again[0] != again[1] and bare_q not in again
    assert key.decrypt(again[0]) == key.decrypt(again[1]) == key.decrypt(bare_q)
    G = gs.server_finish(key, params, again[:1], 1)
    np.testing.assert_array_equal(G, gini_fixed_point(bins_of[:, None], y, 2, 3, F))


@pytest.mark.parametrize("djn", [True, False])
def test_two_class_products_are_rerandomised_and_exact(djn):
    """Two classes: (a_i, b_i) = (n_i + r_i, 2 w_i n_i + r'_i) packed, re-randomised; the
    server's [[sum_i a_i b_i]] and the kept term give Q exactly, shifted labels or not."""
    key = paillier.generate_keys(512)
    y = np.array([0, 1, 1, 0, 1, 0, 0, 1])
    params = GiniParams(4, 2, 8, F, 40, 512, djn)
    assert params.product and params.returned == 1 and params.chunks == 2  # 3 + 1 bins
    labels = gs.encrypt_labels(key, y, params, workers=1)
    bins_of, total = np.array([0, 0, 1, 3, 1, 0, 3, 1]), key.public.product(labels)
    r, s = [5, 6, 7, 8], [9, 10, 11, 12]
    shifted = gp.shift_labels(key.public, params, labels, 1)
    outs = [
        gp.mask_feature(bins_of, labels, total, key.public, params, shift, (r, s))
        for shift in (None, None, shifted)
    ]
    assert outs[0][0] != outs[1][0] != outs[2][0]  # fresh randomness each time
    assert outs[0][1] == outs[1][1] == outs[2][1]  # the kept term: the party's own
    n = [(y[bins_of == i] == 0).sum() for i in range(4)]
    w = [fixed_weight((bins_of == i).sum(), F) for i in range(4)]
    expected = [(n[i] + r[i], 2 * w[i] * n[i] + s[i]) for i in range(4)]
    for packed, _, weights in outs:
        assert weights == w and gp.unmasked_pairs(key, params, packed) == expected
    returned = gs.server_square(key, params, [o[0] for o in outs], 1)
    assert [len(v) for v in returned] == [1, 1, 1]
    assert key.decrypt(returned[0][0]) == sum(a * b for a, b in expected)
    masked = gs.Masked([], [o[1] for o in outs], np.asarray([o[2] for o in outs]), djn, True)
    masked.q_width, masked.q_per_ct = params.q_width, params.q_per_ct
    again = [gs.party_combine(key.public, masked, returned, 1)[0] for _ in range(2)]
    assert again[0] != again[1] and key.decrypt(again[0]) == key.decrypt(again[1])
    G = gs.server_finish(key, params, again[:1], 3)
    np.testing.assert_array_equal(G, gini_fixed_point(bins_of[:, None], y, 4, 2, F).repeat(3))


def test_pair_counts_are_the_class_counts():
    """Bin sums through the joint cells of two features: every [[n_ik]] of both, exactly (a
    constant feature, a feature paired with its own copy, an empty bin)."""
    key = paillier.generate_keys(512)
    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 50)
    X = rng.normal(size=(50, 3))
    X[:, 1] = 1.5
    binned = bin_features(X, 5)
    binned[binned == 4] = 3  # bin 4 empty
    params = GiniParams(5, 4, 50, F, 40, 512)
    assert not params.class_packed
    labels = gs.encrypt_labels(key, y, params, 1)
    columns = [labels[k::3] for k in range(3)]
    totals = [key.public.product(col) for col in columns]
    true = class_counts(binned, y, 5, 4)
    for f, g in ((0, 1), (1, 2), (2, 2), (0, 2)):
        both = gp_counts.pair_sums(binned[:, f], binned[:, g], columns, totals, key.public, 5)
        for h, sums in zip((f, g), both, strict=True):
            (counts, sizes), _ = gp_counts.split_counts(key.public, sums, 4)
            np.testing.assert_array_equal(sizes, true[h].sum(axis=1))
            assert [[int(key.decrypt(c)) for c in row] for row in counts] == true[h].tolist()


def test_packed_results_split_into_groups():
    """[[Q]] of q_per_ct features per ciphertext, over workers; a partial last group."""
    key = paillier.generate_keys(512)
    params = GiniParams(10, 3, 50, F, 40, 512)
    rng = np.random.default_rng(5)
    X, y = rng.normal(size=(50, 2 * params.q_per_ct + 1)), rng.integers(0, 3, 50)
    labels = gs.encrypt_labels(key, y, params, 1)
    masked = gs.party_mask(X, labels, key.public, params, 2)
    weighted = gs.party_combine(
        key.public, masked, gs.server_square(key, params, masked.packed, 2), 2
    )
    assert len(weighted) == 3
    G = gs.server_finish(key, params, weighted, X.shape[1], 2)
    np.testing.assert_array_equal(G, gini_fixed_point(X, y, 10, 3, F))
    with pytest.raises(ValueError, match="packed results"):
        gs.server_finish(key, params, weighted[:2], X.shape[1])


def test_power_product_equals_combine():
    key = paillier.generate_keys(512)
    cts = [key.encrypt(v) for v in range(1, 8)]
    rng = np.random.default_rng(0)
    for bits in (1, 22, 102):
        coeffs = [int(v) for v in rng.integers(-(2**20), 2**20, 7)]
        coeffs = [v << (bits - 21) if bits > 21 else v % 2 for v in coeffs]
        expected = key.public.combine(cts, coeffs)
        assert paillier.power_product(key.public, cts, coeffs) == expected
        assert key.decrypt_signed(expected) == sum(c * (j + 1) for j, c in enumerate(coeffs))
    assert paillier.power_product(key.public, cts, [0] * 7) == 1


def test_raw_ciphertexts_are_phe_ciphertexts():
    key = paillier.generate_keys(512)
    public = phe.PaillierPublicKey(int(key.public.n))
    private = phe.PaillierPrivateKey(public, int(key.p), int(key.q))
    assert private.raw_decrypt(int(key.encrypt(12345))) == 12345
    assert private.raw_decrypt(int(key.public.encrypt(777))) == 777
    assert key.decrypt(public.encrypt(42).ciphertext()) == 42
    assert key.decrypt(key.obfuscator()) == 0  # an n-th residue: an encryption of 0
    cts = [key.encrypt(v) for v in (3, 0, 9)]
    assert key.decrypt(paillier.pack(key.public, cts, 20)) == paillier.pack_plain([3, 0, 9], 20)
    assert paillier.unpack_plain(paillier.pack_plain([3, 0, 9], 20), 3, 20) == [3, 0, 9]
    assert key.decrypt_signed(key.public.combine(cts, [-2, 5, 1], const=-4)) == -6 + 9 - 4
    back = paillier.ciphertexts(paillier.to_wire(cts, key.public.nbytes))
    assert back == cts and key.public.nbytes == 128


@pytest.mark.parametrize("n_classes, workers, djn", [(3, 2, True), (4, 1, True), (3, 2, False)])
def test_many_classes_and_chunked_slots(n_classes, workers, djn):
    """c > 2 (derived last class, several ciphertexts per feature), forked or not."""
    rng = np.random.default_rng(n_classes)
    X, y = rng.normal(size=(120, 5)), rng.integers(0, n_classes, 120)
    X[:, 0] += y
    X[:, 4] = 2.0  # constant: every row in bin 0
    key = paillier.generate_keys(512)
    params = GiniParams(10, n_classes, 120, F, 40, 512, djn)
    assert params.chunks >= 3
    labels = gs.encrypt_labels(key, y, params, workers)
    masked = gs.party_mask(X, labels, key.public, params, workers)
    squares = gs.server_square(key, params, masked.packed, workers)
    weighted = gs.party_combine(key.public, masked, squares, workers)
    G = gs.server_finish(key, params, weighted, 5, workers)
    np.testing.assert_array_equal(G, gini_fixed_point(X, y, 10, n_classes, F))
    assert G[0] == G.min()


@pytest.mark.parametrize("workers", [1, 2])
def test_many_classes_come_packed_by_class_and_decrypt_below_p(workers):
    """20 classes: the row labels also come packed by groups of classes, so each bin's group
    sums are its packed counts (no Horner's rule but for the last classes); every plaintext
    the server decrypts lies below p; the masked values are n + r, and G is exact."""
    rng = np.random.default_rng(20)
    X, y = rng.normal(size=(120, 5)), rng.integers(0, 20, 120)
    X[:, 0] += y / 4
    X[:, 4] = 2.0  # constant: every row in bin 0
    key = paillier.generate_keys(512)
    params = GiniParams(10, 20, 120, F, 40, 512)
    assert params.class_packed and not GiniParams(10, 3, 120, F, 40, 512).class_packed
    assert sorted(j for js in params.layout for j in js) == list(range(params.slots))
    labels = gs.encrypt_labels(key, y, params, workers)
    assert len(labels) == len(y) * params.label_columns > len(y) * 19
    masked = gs.party_mask(X, labels, key.public, params, workers)
    assert all(len(feature) == params.chunks for feature in masked.packed)
    assert all(key.decrypt(ct) < key.p for feature in masked.packed for ct in feature)
    counts = class_counts(bin_features(X, 10), y, 10, 20).reshape(5, -1).astype(object)
    for f in range(5):
        seen = np.asarray(gs.unmasked_slots(key, params, masked.packed[f]), dtype=object)
        r = seen - counts[f]
        assert all(0 <= v < 2**params.mask_range for v in r) and len(set(r.tolist())) == r.size
    squares = gs.server_square(key, params, masked.packed, workers)
    weighted = gs.party_combine(key.public, masked, squares, workers)
    G = gs.server_finish(key, params, weighted, 5, workers)
    np.testing.assert_array_equal(G, gini_fixed_point(X, y, 10, 20, F))
    assert G[0] == G.min()
