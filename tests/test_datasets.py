"""Tests for vflfs.datasets: registry, data directory, cache, synthetic and benchmark loaders."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import cross_val_score

from vflfs.datasets import (
    DATA_DIR_ENV,
    DataError,
    Dataset,
    clear_dataset_cache,
    dataset_names,
    load_dataset,
    resolve_data_dir,
)
from vflfs.datasets.paths import default_data_dir

from helpers import save_npz, small_xy

DATA_DIR = os.environ.get(DATA_DIR_ENV) or str(default_data_dir())
needs_data = pytest.mark.skipif(
    not Path(DATA_DIR, "madelon.npz").is_file(), reason=f"benchmark files not in {DATA_DIR}"
)
REAL_SHAPES = {
    "madelon": (2600, 500, 2),
    "arcene": (200, 10000, 2),
    "basehock": (1993, 4862, 2),
    "pcmac": (1943, 3289, 2),
    "relathe": (1427, 4322, 2),
    "coil20": (1440, 1024, 20),
    "isolet": (1560, 617, 26),
    "phishing": (11055, 30, 2),
    "sylva": (13086, 216, 2),
}


pytestmark = pytest.mark.usefixtures("fresh_dataset_cache")


# --- registry and data directory -------------------------------------------------------------


def test_dataset_names_sorted_and_complete():
    names = dataset_names()
    assert names == sorted(names)
    assert {"synthetic_madelon", "friedman", "npz", "csv", *REAL_SHAPES} <= set(names)


def test_resolve_data_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert resolve_data_dir(None) is None
    assert resolve_data_dir("") is None
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "env"))
    assert resolve_data_dir(None) == tmp_path / "env"
    assert resolve_data_dir(str(tmp_path / "cfg")) == tmp_path / "cfg"


def test_unknown_name_lists_available_names():
    with pytest.raises(DataError, match="unknown dataset 'nope'") as info:
        load_dataset("nope")
    assert "synthetic_madelon" in str(info.value) and "friedman" in str(info.value)


def test_unknown_and_missing_params():
    with pytest.raises(DataError, match="no parameter.*'bogus'.*n_samples"):
        load_dataset("friedman", bogus=1)
    with pytest.raises(DataError, match="needs the parameter.*path"):
        load_dataset("npz")


def test_missing_file_names_path_and_both_settings(tmp_path):
    with pytest.raises(DataError) as info:
        load_dataset("madelon", data_dir=str(tmp_path))
    message = str(info.value)
    assert str(tmp_path / "madelon.npz") in message
    assert "VFLFS_DATA_DIR" in message and "dataset.data_dir" in message


def test_no_data_dir_looks_in_the_default_folder_and_names_both_settings(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(DataError, match="vflfs data fetch arcene") as info:
        load_dataset("arcene")
    assert "VFLFS_DATA_DIR" in str(info.value) and "dataset.data_dir" in str(info.value)


def test_env_var_is_used_when_config_is_empty(monkeypatch, tmp_path):
    X, y = small_xy()
    save_npz(tmp_path / "sylva.npz", X=X.astype(np.float32), y=y)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    ds = load_dataset("sylva", data_dir="")
    assert ds.X.shape == (20, 4)
    np.testing.assert_allclose(ds.X, X.astype(np.float32))


def test_cache_returns_same_read_only_dataset():
    a = load_dataset("friedman", n_samples=50, n_features=8)
    b = load_dataset("friedman", n_features=8, n_samples=50)
    assert a is b
    assert load_dataset("friedman", n_samples=50, n_features=8, seed=1) is not a
    for array in (a.X, a.y, a.relevant):
        with pytest.raises(ValueError):
            array[0] = 0


def test_cache_reloads_an_edited_user_file(tmp_path):
    X, y = small_xy()
    path = save_npz(tmp_path / "u.npz", X=X, y=y)
    first = load_dataset("npz", path=str(path))
    save_npz(path, X=X[:10], y=y[:10])
    os.utime(path, ns=(1, 1))
    assert load_dataset("npz", path=str(path)).n_samples == 10
    assert first.n_samples == 20


# --- synthetic sets --------------------------------------------------------------------------


def test_synthetic_madelon_default_shape_and_relevant():
    ds = load_dataset("synthetic_madelon")
    assert isinstance(ds, Dataset)
    assert (ds.n_samples, ds.n_features) == (2600, 500)
    assert ds.X.dtype == np.float32 and ds.y.dtype == np.int64
    assert ds.task == "classification" and ds.n_classes == 2
    assert ds.relevant is not None and ds.relevant.size == 20
    assert np.all(np.diff(ds.relevant) > 0)
    assert not np.array_equal(ds.relevant, np.arange(20)), "columns must be permuted"


def test_synthetic_madelon_relevant_columns_are_informative():
    ds = load_dataset("synthetic_madelon")
    noise = np.setdiff1d(np.arange(ds.n_features), ds.relevant)[:20]
    model = LogisticRegression(max_iter=1000)
    on_relevant = cross_val_score(model, ds.X[:, ds.relevant], ds.y, cv=3).mean()
    on_noise = cross_val_score(model, ds.X[:, noise], ds.y, cv=3).mean()
    assert on_relevant > on_noise + 0.15


def test_synthetic_madelon_seeded_and_overridable():
    small = {"n_samples": 300, "n_features": 40, "n_informative": 3, "n_redundant": 2}
    a = load_dataset("synthetic_madelon", seed=1, n_clusters_per_class=2, **small)
    c = load_dataset("synthetic_madelon", seed=2, n_clusters_per_class=2, **small)
    assert a.X.shape == (300, 40) and a.relevant.size == 5
    clear_dataset_cache()  # regenerate rather than hit the cache
    b = load_dataset("synthetic_madelon", seed=1, n_clusters_per_class=2, **small)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.relevant, b.relevant)
    assert not np.array_equal(a.X, c.X)


def test_synthetic_madelon_rejected_params_raise_data_error():
    with pytest.raises(DataError, match="scikit-learn rejected"):
        load_dataset("synthetic_madelon", n_informative=2)  # 2 classes x 16 clusters > 2**2


def test_friedman_regression_with_relevant_first_five():
    ds = load_dataset("friedman")
    assert ds.X.shape == (2000, 1000)
    assert ds.task == "regression" and ds.n_classes == 0 and ds.y.dtype == np.float32
    np.testing.assert_array_equal(ds.relevant, np.arange(5))
    r2_relevant = LinearRegression().fit(ds.X[:, :5], ds.y).score(ds.X[:, :5], ds.y)
    r2_noise = LinearRegression().fit(ds.X[:, 5:10], ds.y).score(ds.X[:, 5:10], ds.y)
    assert r2_relevant > 0.5 > r2_noise


# --- real benchmark files --------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize("name", sorted(REAL_SHAPES))
def test_real_benchmark_shapes(name):
    ds = load_dataset(name, data_dir=DATA_DIR)
    n, d, c = REAL_SHAPES[name]
    assert (ds.n_samples, ds.n_features, ds.n_classes) == (n, d, c)
    assert ds.X.dtype == np.float32 and ds.y.dtype == np.int64
    assert ds.image_shape == ((32, 32) if name == "coil20" else None)
    has_split = name in {"madelon", "arcene"}
    assert (ds.train_idx is not None) == has_split
    if has_split:
        both = np.concatenate([ds.train_idx, ds.test_idx])
        assert np.unique(both).size == both.size


def test_xor_labels_are_an_interaction_no_column_shows_alone():
    ds = load_dataset("xor", n_samples=4000, n_features=10, columns=[1, 7], label_noise=0.0)
    a, b = ds.X[:, 1] > 0, ds.X[:, 7] > 0
    assert list(ds.relevant) == [1, 7] and np.array_equal(ds.y, (a ^ b).astype(np.int64))
    for column in (1, 7):  # alone, a column's sign says nothing about the label
        agree = np.mean((ds.X[:, column] > 0) == ds.y.astype(bool))
        assert abs(agree - 0.5) < 0.03
    noisy = load_dataset("xor", n_samples=4000, n_features=10, columns=[1, 7], label_noise=0.2)
    assert 0.05 < np.mean(noisy.y != ds.y) < 0.15  # a fifth redrawn, half of them changed
    with pytest.raises(DataError, match=r"columns must be two different indices.*fix"):
        load_dataset("xor", n_features=10, columns=[3, 12])
