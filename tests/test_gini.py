"""Secure Gini (FedSDG-FS Algorithm 1): exact against plaintext, and what each side sees.

The protocol runs over the real ClientApp (LocalGrid) on a slice of the real MADELON data with
a 512-bit key; an observer records every message, and the tests decrypt what the server could
decrypt to check that it only ever sees masked values and the final scores.
"""

from __future__ import annotations

import numpy as np
import pytest
from phe import paillier as phe
from test_privacy import Recorder

from vflfs.client_app.app import app as client_app
from vflfs.client_app.data import party_data
from vflfs.client_app.ops_gini import stored_scores
from vflfs.federation import DOWN, UP, Federation, LocalGrid
from vflfs.federation.payload import decode
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
    gini_scores,
)
from vflfs.protocol import GINI_COMBINE, GINI_MASK, GINI_SCORES
from vflfs.runtime.config import ConfigError, compose_config
from vflfs.server_app.experiment import Experiment
from vflfs.strategies.gini import global_ranks, keep_best, secure_gini
from vflfs.strategies.secure_scoring import quantile_classes
from vflfs.strategies.vfl import VFL

F = 52  # default weight_bits
ROWS = 600  # training rows scored (of MADELON's 1600), to keep the test fast


def set_up(cfg, observers=None):
    """A connected federation over the real ClientApp with every party set up."""
    experiment = Experiment.from_config(cfg)
    grid = LocalGrid(client_app, experiment.num_parties)
    federation = Federation(grid, experiment.num_parties, observers=observers)
    federation.connect()
    VFL(cfg).configure(federation, experiment)
    return federation, experiment, grid


def views(experiment: Experiment, rows: np.ndarray) -> list[np.ndarray]:
    """Each party's full feature set at ``rows``, as the party holds it."""
    train = experiment.splits.train
    return [
        party_data(experiment.party_spec(m)["data"], train).X[rows]
        for m in range(experiment.num_parties)
    ]


@pytest.fixture(scope="module")
def madelon_run(data_dir):
    cfg = compose_config(f"dataset=madelon dataset.data_dir={data_dir} split.num_parties=2")
    recorder = Recorder()
    federation, experiment, grid = set_up(cfg, [recorder])
    recorder.messages.clear()
    key = paillier.generate_keys(512)
    rows = experiment.splits.train[:ROWS]
    scores = secure_gini(federation, experiment, {"key_bits": 512}, keys=key, rows=rows)
    return experiment, rows, scores, recorder, key, grid, federation


def test_secure_gini_equals_plaintext_on_madelon(madelon_run):
    experiment, rows, scores, *_ = madelon_run
    y = experiment.y[rows]
    n = len(y)
    assert [len(s) for s in scores] == [250, 250]
    for secure, X in zip(scores, views(experiment, rows), strict=True):
        np.testing.assert_array_equal(secure, gini_fixed_point(X, y, 10, 2, F))  # bit for bit
        plain = gini_scores(X, y, 10, 2)
        assert np.abs(secure - plain).max() <= n / 2 ** (F + 1)
        assert np.ptp(plain) > 1e-4  # real differences between features, not a flat vector


def test_full_randomness_equals_plaintext_on_madelon(data_dir):
    cfg = compose_config(f"dataset=madelon dataset.data_dir={data_dir} split.num_parties=2")
    federation, experiment, _ = set_up(cfg)
    rows = experiment.splits.train[:200]
    scores = secure_gini(federation, experiment, {"key_bits": 512, "randomness": "full"}, rows=rows)
    y = experiment.y[rows]
    for secure, X in zip(scores, views(experiment, rows), strict=True):
        np.testing.assert_array_equal(secure, gini_fixed_point(X, y, 10, 2, F))


def test_each_party_holds_only_its_own_scores(madelon_run):
    _, _, scores, recorder, _, grid, federation = madelon_run
    for node, (pid, _) in grid.contexts.items():
        np.testing.assert_array_equal(stored_scores(grid._state[node]), scores[pid])
    last = [decode(c) for d, _, op, c in recorder.messages if op == GINI_SCORES.name and d == DOWN]
    assert [len(p["scores"]) for p in last] == [250, 250]
    assert federation.traffic.round_trips["gini"] == 3


def test_parties_receive_only_ciphertexts_and_their_scores(madelon_run):
    experiment, rows, scores, recorder, key, *_ = madelon_run
    y = experiment.y[rows]
    down = [(p, op, decode(c)) for d, p, op, c in recorder.messages if d == DOWN]
    assert {op for _, op, _ in down} == {
        GINI_MASK.name,
        GINI_COMBINE.name,
        GINI_SCORES.name,
    }
    for party, _, payload in down:
        for name, value in payload.items():
            if isinstance(value, np.ndarray) and value.dtype == np.uint8:
                assert value.shape[-1] == key.public.nbytes  # ciphertext bytes
            elif name == "rows":
                np.testing.assert_array_equal(value, rows)
            elif name == "scores":
                np.testing.assert_array_equal(value, scores[party])
            else:
                assert name == "public_key" or name.startswith("gini_") or name == "workers", name
    first = next(p for _, op, p in down if op == GINI_MASK.name)
    assert first["gini_djn"] == 1  # DJN randomness by default, on both sides
    labels = first["labels"]
    cts = paillier.ciphertexts(labels)
    assert len(set(cts)) == len(cts) == len(y)  # two plaintext values, all ciphertexts distinct
    assert [int(key.decrypt(c)) for c in cts] == (y == 0).astype(int).tolist()


def test_server_sees_masked_counts_and_final_scores_only(madelon_run):
    experiment, rows, scores, recorder, key, *_ = madelon_run
    y = experiment.y[rows]
    params = GiniParams(10, 2, len(y), F, 40, 512)
    up = [(p, op, decode(c)) for d, p, op, c in recorder.messages if d == UP]
    for party, op, payload in up:
        if op == GINI_MASK.name:  # two classes: per bin a = n + r, b = 2 w n + r'
            X = views(experiment, rows)[party]
            counts = class_counts(bin_features(X, 10), y, 10, 2)
            n = counts[:, :, 0].astype(object)
            w = np.vectorize(lambda z: fixed_weight(z, F), otypes=[object])(counts.sum(axis=2))
            packed = paillier.ciphertexts(payload["packed"])
            per = params.chunks
            pairs = np.asarray(
                [
                    gp.unmasked_pairs(key, params, packed[f * per : (f + 1) * per])
                    for f in range(X.shape[1])
                ],
                dtype=object,
            )
            for seen, true, bits in (
                (pairs[:, :, 0], n, params.mask_range),
                (pairs[:, :, 1], 2 * w * n, params.b_mask_range),
            ):
                r = (seen - true).astype(float) / 2**bits  # the masks, scaled to [0, 1)
                assert (r >= 0).all() and (r < 1).all()
                assert not (seen == true).any()
                assert abs(r.mean() - 0.5) < 0.05
                assert abs(np.corrcoef(r.ravel(), true.astype(float).ravel())[0, 1]) < 0.1
                assert len(set(seen.ravel().tolist())) == seen.size
        elif op == GINI_COMBINE.name:  # Q of q_per_ct features per ciphertext: G, nothing else
            packed = [int(key.decrypt(c)) for c in paillier.ciphertexts(payload["weighted"])]
            slots = [paillier.unpack_plain(m, params.q_per_ct, params.q_width) for m in packed]
            q = [v for slot in slots for v in slot]
            assert len(packed) == -(-len(scores[party]) // params.q_per_ct) < len(scores[party])
            assert not any(q[len(scores[party]) :])  # unused slots are empty
            G = [1 - v / (len(y) << F) for v in q[: len(scores[party])]]
            np.testing.assert_allclose(G, scores[party], rtol=0, atol=1e-15)


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


@pytest.mark.parametrize("djn", [True, False])
def test_randomness_setting_is_followed_by_both_sides(djn, monkeypatch):
    """``djn``: every encryption and re-randomisation draws h_s^alpha (no r^n); ``full``: the
    server's CRT r^n and the party's r^n (no DJN obfuscator): the party follows the server."""
    calls = {"djn": 0, "full": 0}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    for cls in (paillier.PublicKey, paillier.PrivateKey):  # the key owner's by CRT
        monkeypatch.setattr(cls, "djn_obfuscator", counted("djn", cls.djn_obfuscator))
        monkeypatch.setattr(cls, "obfuscator", counted("full", cls.obfuscator))
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(40, 3)), rng.integers(0, 3, 40)
    key = paillier.generate_keys(512)
    params = GiniParams(4, 3, 40, F, 40, 512, djn)
    masked = gs.party_mask(X, gs.encrypt_labels(key, y, params, 1), key.public, params, 1)
    squares = gs.server_square(key, params, masked.packed, 1)
    G = gs.server_finish(key, params, gs.party_combine(key.public, masked, squares, 1), 3)
    np.testing.assert_array_equal(G, gini_fixed_point(X, y, 4, 3, F))
    # labels 40 x 2, per feature its packed ciphertexts and 4 squares, one [[Q]] for all three
    expected = 40 * 2 + 3 * (params.chunks + 4) + 1
    assert calls == ({"djn": expected, "full": 0} if djn else {"djn": 0, "full": expected})


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


def test_regression_targets_are_scored_over_their_quantile_classes():
    """Secure Gini of a regression target: the plaintext Gini of its training quantile
    classes, bit for bit; FRIEDMAN's five relevant columns score best."""
    cfg = compose_config(
        "dataset=friedman dataset.params.n_samples=300 dataset.params.n_features=10 "
        "split.num_parties=2"
    )
    federation, experiment, _ = set_up(cfg)
    rows = experiment.splits.train
    scores = secure_gini(federation, experiment, {"key_bits": 512}, rows=rows)
    y, n = quantile_classes(experiment.y[rows], 5)
    assert n == 5 and np.bincount(y).min() >= len(rows) // 5 - 1
    for secure, X in zip(scores, views(experiment, rows), strict=True):
        np.testing.assert_array_equal(secure, gini_fixed_point(X, y, 10, 5, F))
    assert set(np.argsort(np.concatenate(scores))[:5]) == {0, 1, 2, 3, 4}
    # ties merge quantiles: three distinct values, three classes
    assert quantile_classes(np.repeat([0.0, 1.0, 2.0], 4), 5)[1] == 3


def test_ranks_and_keep_best():
    scores = [np.array([0.4, 0.1, 0.3]), np.array([0.2, 0.45, 0.44, 0.5])]
    assert [r.tolist() for r in global_ranks(scores)] == [[3, 0, 2], [1, 5, 4, 6]]
    assert [k.tolist() for k in keep_best(scores, 0.43)] == [[1, 2], [0]]
    # a party with none of the best still keeps its best feature
    assert [k.tolist() for k in keep_best([np.array([0.9, 0.8]), np.array([0.1, 0.2])], 0.25)] == [
        [1],
        [0],
    ]
    assert [k.tolist() for k in keep_best(scores, 0.3, lower_is_better=False)] == [[0], [1, 3]]
    with pytest.raises(ConfigError):
        keep_best(scores, 0.0)


def test_bad_gini_config_is_named(tmp_path):
    cfg = compose_config(
        "dataset=friedman dataset.params.n_samples=100 dataset.params.n_features=8"
    )
    federation = Federation(LocalGrid(client_app, 2), 2)
    experiment = Experiment.from_config(cfg)
    experiment.y = np.full_like(experiment.y, 1.5)  # a constant target: nothing to score
    with pytest.raises(ConfigError, match="constant"):
        secure_gini(federation, experiment, {"key_bits": 512})
    with pytest.raises(ConfigError, match="bins_typo"):
        secure_gini(federation, Experiment.from_config(compose_config()), {"bins_typo": 3})
    with pytest.raises(ConfigError, match="strategy.gini.target_classes"):
        secure_gini(federation, Experiment.from_config(compose_config()), {"target_classes": 1})
    with pytest.raises(ConfigError, match="randomness"):
        secure_gini(federation, Experiment.from_config(compose_config()), {"randomness": "r^n"})


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
