"""Secure Gini (FedSDG-FS Algorithm 1): exact against plaintext, and what each side sees.

The protocol runs over the real ClientApp (LocalGrid) on a slice of the real MADELON data with
a 512-bit key; an observer records every message, and the tests decrypt what the server could
decrypt to check that it only ever sees masked values and the final scores.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_privacy import Recorder

from vflfs.client_app.app import app as client_app
from vflfs.client_app.data import party_data
from vflfs.client_app.ops_gini import stored_scores
from vflfs.federation import DOWN, UP, Federation, LocalGrid
from vflfs.federation.payload import decode
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
