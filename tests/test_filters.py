"""Filter baselines (spec section 6): Gini filter, F-statistic filter, random selection.

Each runs end to end over the real ClientApp (LocalGrid) on the tiny MADELON-like problem, with
512-bit keys: the right number of features is kept, the parties' input layers shrink to them,
and the secure F-statistic equals its plaintext twin and finds the informative columns.
"""

from __future__ import annotations

import logging
import re
from fractions import Fraction

import numpy as np
import pytest
from sklearn.feature_selection import f_classif
from test_gini import Recorder, set_up, views

from vflfs.client_app.app import app as client_app
from vflfs.client_app.ops_gini import stored_scores
from vflfs.client_app.party_store import PartyStore
from vflfs.federation import UP, LocalGrid
from vflfs.federation.payload import decode
from vflfs.ml import paillier
from vflfs.ml.fstat import FStatParams, fstat_fixed_point, quantize
from vflfs.ml.fstat_secure import unmasked_sums
from vflfs.ml.gini import gini_fixed_point
from vflfs.protocol import FSTAT_MASK
from vflfs.server_app.experiment import Experiment
from vflfs.server_app.run import run_experiment
from vflfs.strategies.fstat_filter import secure_fstat
from vflfs.strategies.gini import keep_best, secure_gini

from helpers import tiny_config

SMALL_KEY = {
    "gini_filter": "strategy.gini.key_bits=512",
    "fstat_filter": "strategy.fstat.key_bits=512",
    "random_fs": "",
    "variance_filter": "",
}


def run_filter(strategy: str, out_dir, extra: str = "") -> tuple[dict, LocalGrid, Experiment]:
    """A short run of ``strategy`` over a LocalGrid we keep, to inspect the parties after."""
    cfg = tiny_config(f"strategy={strategy} training.epochs=2 {SMALL_KEY[strategy]} {extra}")
    grid = LocalGrid(client_app, int(cfg.split.num_parties))
    return run_experiment(grid, cfg, out_dir), grid, Experiment.from_config(cfg)


def parties(grid: LocalGrid):
    """Each party as its node restores it from ``context.state``, by partition id."""
    out = {}
    for node, (pid, _) in grid.contexts.items():
        store = PartyStore(grid._state[node])
        store.forget()
        out[pid] = (store.load(), grid._state[node])
    return [out[m] for m in sorted(out)]


@pytest.mark.parametrize("strategy", ["gini_filter", "fstat_filter", "random_fs"])
def test_filters_keep_the_fraction_and_shrink_the_parties(strategy, tmp_path):
    summary, grid, experiment = run_filter(strategy, tmp_path, "strategy.keep_fraction=0.25")
    total = sum(p["n_features"] for p in summary["parties"])
    kept = summary["extra"]["filter"]["kept"]
    assert sum(len(k) for k in kept) == round(0.25 * total) == 10
    assert summary["selection"]["selected_features"] == 10
    assert summary["selection"]["ratio"] == pytest.approx(10 / total)
    for (party, _), mine, report in zip(parties(grid), kept, summary["parties"], strict=True):
        assert party.features.tolist() == mine == report["selected"]
        assert party.model.input_layer.weight.shape[1] == len(mine)  # the input layer shrank
    scores = [np.asarray(s, dtype=float) for s in summary["extra"]["filter"]["scores"]]
    lower = strategy != "fstat_filter"
    assert [k.tolist() for k in keep_best(scores, 0.25, lower)] == kept
    assert summary["communication"]["phases"][
        {"gini_filter": "gini", "fstat_filter": "fstat", "random_fs": "selection"}[strategy]
    ]["round_trips"] == (1 if strategy == "random_fs" else 4)


def test_gini_filter_keeps_the_globally_best_by_plaintext_gini(tmp_path):
    summary, grid, experiment = run_filter("gini_filter", tmp_path, "strategy.keep_fraction=0.5")
    rows = experiment.splits.train
    y = experiment.y[rows]
    plain = [gini_fixed_point(X, y, 10, 2, 52) for X in views(experiment, rows)]
    assert [k.tolist() for k in keep_best(plain, 0.5)] == summary["extra"]["filter"]["kept"]
    for (_, context), mine in zip(parties(grid), plain, strict=True):
        np.testing.assert_array_equal(stored_scores(context, "gini"), mine)


def test_random_fs_is_seeded(tmp_path):
    kept = [
        run_filter("random_fs", tmp_path / str(i), extra)[0]["extra"]["filter"]["kept"]
        for i, extra in enumerate(["", "", "strategy.seed=1"])
    ]
    assert kept[0] == kept[1] != kept[2]


def test_variance_filter_keeps_the_features_of_highest_variance(tmp_path):
    """The worked example of docs/strategies.md (a strategy, its protocol module, its party
    module, its YAML): the parties' own operation, then VFL on the features kept."""
    summary, grid, experiment = run_filter(
        "variance_filter", tmp_path, "strategy.keep_fraction=0.5"
    )
    rows = experiment.splits.train
    plain = [X.astype(np.float64).var(axis=0) for X in views(experiment, rows)]
    scores = [np.asarray(s) for s in summary["extra"]["filter"]["scores"]]
    for got, expected in zip(scores, plain, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    kept = summary["extra"]["filter"]["kept"]
    assert [k.tolist() for k in keep_best(plain, 0.5, lower_is_better=False)] == kept
    assert [party.features.tolist() for party, _ in parties(grid)] == kept
    # the variances, then the removal of the other features
    assert summary["communication"]["phases"]["selection"]["round_trips"] == 2


def exact_f(Xq: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The two-class ANOVA F in exact rational arithmetic."""
    n = [int((y == k).sum()) for k in (0, 1)]
    out = []
    for col in Xq.T.astype(object):
        sums, total = [col[y == k].sum() for k in (0, 1)], col.sum()
        ssb = sum(Fraction(s * s, m) for s, m in zip(sums, n, strict=True))
        ssb -= Fraction(total * total, len(y))
        sst = Fraction((col * col).sum()) - Fraction(total * total, len(y))
        out.append(float((len(y) - 2) * ssb / (sst - ssb)))
    return np.asarray(out)


@pytest.fixture(scope="module")
def fstat_run():
    cfg = tiny_config("noise.ratio=0.5")
    recorder = Recorder()
    federation, experiment, grid = set_up(cfg, [recorder])
    recorder.messages.clear()
    key = paillier.generate_keys(512)
    scores = secure_fstat(federation, experiment, {"key_bits": 512}, keys=key)
    return experiment, scores, recorder, key


def test_secure_fstat_equals_plaintext(fstat_run):
    experiment, scores, _, _ = fstat_run
    rows = experiment.splits.train
    y = experiment.y[rows]
    params = FStatParams(2, len(rows), 2, 16, 56, 40, 512)
    for secure, X in zip(scores, views(experiment, rows), strict=True):
        Xq = quantize(X, 16)
        np.testing.assert_array_equal(secure, fstat_fixed_point(Xq, y, params))  # bit for bit
        np.testing.assert_allclose(secure, exact_f(Xq, y), rtol=1e-13)
        np.testing.assert_allclose(secure, f_classif(Xq, y)[0], rtol=1e-6)  # float cancellation


def test_secure_fstat_ranks_informative_columns_above_noise(fstat_run):
    experiment, scores, _, _ = fstat_run
    F = np.concatenate(scores)
    columns = np.concatenate(
        [
            np.r_[c, np.full(len(s) - len(c), -1)]
            for c, s in zip(experiment.columns, scores, strict=True)
        ]
    )  # original column per feature; -1 for injected noise
    relevant = np.isin(columns, experiment.relevant)
    noise = columns == -1
    assert noise.sum() >= 15 and relevant.sum() == 8
    order = np.argsort(-F)
    assert relevant[order[:4]].all()  # chance: (8 / 60)^4
    assert F[relevant].mean() > 5 * F[noise].mean()
    assert np.median(np.flatnonzero(relevant[order])) < np.median(np.flatnonzero(noise[order]))


def test_fstat_server_sees_only_masked_class_sums(fstat_run):
    experiment, scores, recorder, key = fstat_run
    rows = experiment.splits.train
    y = experiment.y[rows]
    params = FStatParams(2, len(rows), 2, 16, 56, 40, 512)
    checked = 0
    for direction, party, op, content in recorder.messages:
        payload = decode(content)
        if direction != UP:
            assert all(
                v.dtype == np.uint8 and v.shape[-1] == key.public.nbytes
                for k, v in payload.items()
                if isinstance(v, np.ndarray) and k not in ("rows", "scores")
            )
            continue
        if op != FSTAT_MASK.name:
            continue
        Xq = quantize(views(experiment, rows)[party], 16)
        true = np.stack([Xq[y == k].sum(axis=0) for k in (0, 1)], axis=1).astype(object)
        packed = paillier.ciphertexts(payload["packed"])
        u = np.asarray([unmasked_sums(key, params, [c]) for c in packed], dtype=object)
        masks = (u - true).astype(float) / 2**params.mask_range
        assert (masks >= 0).all() and (masks < 1).all() and not (u == true).any()
        checked += 1
    assert checked == experiment.num_parties


def test_fstat_results_travel_packed():
    """V of v_per_ct features per returned ciphertext (three classes, two workers, a partial
    last group): exact, and a wrong count of packed results is named."""
    from vflfs.ml import fstat_secure as fs
    from vflfs.ml.fstat import class_weights

    key = paillier.generate_keys(512)
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, 60)
    params = FStatParams(3, 60, 3, 16, 56, 40, 512)
    X = rng.normal(size=(60, 2 * params.v_per_ct + 1)) + y[:, None] * [[1.0]]
    packed, kept = fs.party_mask(X, fs.encrypt_labels(key, y, params, 1), key.public, params, 2)
    weights, scale = class_weights(y, 3)
    returned = fs.server_square(key, params, weights, packed, 2)
    enc = [key.encrypt(v) for v in [*weights, scale]]
    values = fs.party_combine(key.public, params, kept, returned, enc, 2)
    assert len(values) == 3
    F = fs.server_finish(key, params, scale, values, X.shape[1])
    np.testing.assert_array_equal(F, fstat_fixed_point(quantize(X, 16), y, params))
    with pytest.raises(ValueError, match="packed results"):
        fs.server_finish(key, params, scale, values, 1)


def test_fstat_full_randomness_equals_plaintext_and_bad_randomness_is_named():
    from vflfs.runtime.config import ConfigError
    from vflfs.strategies.fstat_filter import FStatConfig

    cfg = tiny_config()
    federation, experiment, _ = set_up(cfg)
    scores = secure_fstat(federation, experiment, {"key_bits": 512, "randomness": "full"})
    rows = experiment.splits.train
    y = experiment.y[rows]
    params = FStatParams(2, len(rows), 2, 16, 56, 40, 512, djn=False)
    for secure, X in zip(scores, views(experiment, rows), strict=True):
        np.testing.assert_array_equal(secure, fstat_fixed_point(quantize(X, 16), y, params))
    with pytest.raises(ConfigError, match="randomness"):
        FStatConfig.from_cfg({"randomness": "r^n"})


@pytest.mark.parametrize(
    ("phase", "score", "squared", "last"),
    [
        (
            "secure Gini",
            secure_gini,
            "masked counts squared",
            r"djn randomness, \d+\.\d s",
        ),
        ("secure F-statistic", secure_fstat, "masked class sums squared", r"\d+\.\d s"),
    ],
)
def test_secure_scoring_logs_each_step_as_it_ends(caplog, phase, score, squared, last):
    """A phase that can run for minutes says what it scores, then each step with its seconds."""
    federation, experiment, _ = set_up(tiny_config())
    with caplog.at_level(logging.INFO, logger="vflfs"):
        score(federation, experiment, {"key_bits": 512}, keys=paillier.generate_keys(512))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"{phase}: ")]
    features = sum(len(c) for c in experiment.columns)
    rows, classes = len(experiment.splits.train), experiment.task.n_classes
    assert lines[0] == (
        f"{phase}: {features} features, {rows} training rows, {classes} classes, 512-bit key"
    )
    steps = [re.fullmatch(f"{phase}: " + r"(.+) \(\d+\.\d s\)", line) for line in lines[1:-1]]
    assert all(steps), lines
    assert [m.group(1) for m in steps] == [
        "labels encrypted",
        "the parties' masked counts received",
        squared,
        "the parties' weighted sums received",
        "scores decrypted and sent to their parties",
    ]
    assert re.fullmatch(f"{phase}: {last}", lines[-1])
