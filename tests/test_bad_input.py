"""Bad input ends the run before any message is sent, with a message naming the problem."""

from __future__ import annotations

import numpy as np
import pytest

from vflfs.runtime.config import compose_config

from helpers import run_local, tiny_config


def fails_before_training(cfg, tmp_path, match: str) -> None:
    sent = []
    with pytest.raises(ValueError, match=match):
        run_local(cfg, tmp_path / "out", num_parties=2, observers=[lambda *a: sent.append(a)])
    assert sent == []
    assert not (tmp_path / "out" / "results.json").exists()
    assert (tmp_path / "out" / "error.txt").exists()


def user_npz(tmp_path, X, y) -> str:
    path = tmp_path / "mine.npz"
    np.savez(path, X=X, y=y)
    return f"dataset=npz dataset.params.path={path} split.num_parties=2"


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ("dataset.name=nosuch", r"unknown dataset 'nosuch'.*synthetic_madelon"),
        ("split.kind=diagonal", r"diagonal.*even"),
        ("strategy.name=nosuch", r"unknown strategy 'nosuch'.*vfl"),
        ("split=sizes split.sizes=[10,10]", r"add up.*20.*40"),
        ("split=sizes split.sizes=[40,0]", r"party 1 has no columns"),
        ("split=columns split.columns=[[0,1],[1,2]]", r"1"),
        ("training.local_steps=0", r"training.local_steps must be >= 1"),
        ("engine=ray", r"engine must be 'local' or 'simulation', got 'ray'"),
        ("scaling=standard", r"scaling must be one of auto, minmax, got 'standard'"),
        ("training.epochs=abc", r"training\.epochs must be an integer, got 'abc'"),
        ("training.lr=fast", r"training\.lr must be a number, got 'fast'"),
        ("training.lr=0", r"training\.lr must be > 0"),
        ("strategy=stg strategy.sigma=wide", r"strategy\.sigma must be a number, got 'wide'"),
        ("strategy=stg strategy.reduce=max", r"strategy\.reduce must be one of \['mean', 'sum'\]"),
        ("secure=plaintext secure.randomness=rsa", r"secure\.randomness must be one of"),
        ("secure=plaintext training.local_steps=2", r"secure layer .* training\.local_steps=1"),
        ("+secure.keybits=512", r"unknown secure keys \['keybits'\]"),
    ],
)
def test_config_errors(tmp_path, overrides, match):
    cfg = tiny_config(f"split.num_parties=2 {overrides}")
    fails_before_training(cfg, tmp_path, match)


def test_missing_data_file_names_both_settings(tmp_path):
    cfg = compose_config(f"dataset=madelon dataset.data_dir={tmp_path} split.num_parties=2")
    fails_before_training(
        cfg,
        tmp_path,
        r"madelon.npz.*(dataset.data_dir.*VFLFS_DATA_DIR|VFLFS_DATA_DIR.*dataset.data_dir)",
    )


def test_unset_user_file_path_is_named(tmp_path):
    cfg = compose_config("dataset=npz split.num_parties=2")
    fails_before_training(cfg, tmp_path, r"dataset.params.path")


@pytest.mark.parametrize(("bad", "match"), [(np.nan, r"NaN"), (np.inf, r"infinite")])
def test_non_finite_values(tmp_path, bad, match):
    X = np.random.default_rng(0).normal(size=(50, 6)).astype(np.float32)
    X[7, 3] = bad
    y = np.arange(50) % 2
    fails_before_training(compose_config(user_npz(tmp_path, X, y)), tmp_path, match)


def test_row_count_mismatch(tmp_path):
    X = np.zeros((50, 6), np.float32)
    y = np.arange(49) % 2
    fails_before_training(compose_config(user_npz(tmp_path, X, y)), tmp_path, r"50.*49|49.*50")
