"""Tests for spurious features, min-max scaling and a party's data view."""

from __future__ import annotations

import numpy as np
import pytest

from vflfs.datasets import (
    DataError,
    add_spurious_features,
    build_party_data,
    minmax_scale,
    noise_ratios,
)


def _data(n: int = 400, d: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    X = rng.normal(size=(n, d)) + y[:, None]
    return X.astype(np.float32), y


# --- spurious features -----------------------------------------------------------------------


def test_spurious_count_mask_and_original_columns_kept():
    X, _ = _data(d=10)
    X_new, mask = add_spurious_features(X, np.arange(300), ratio=0.5, seed=0)
    assert X_new.shape == (400, 15) and X_new.dtype == np.float32
    assert mask.dtype == bool and mask.shape == (15,)
    np.testing.assert_array_equal(mask, [False] * 10 + [True] * 5)
    np.testing.assert_array_equal(X_new[:, :10], X)
    assert add_spurious_features(X, np.arange(300), ratio=0.26, seed=0)[1].sum() == 3


def test_spurious_reproducible_and_seed_dependent():
    X, _ = _data()
    a, _ = add_spurious_features(X, np.arange(300), 0.8, seed=4)
    b, _ = add_spurious_features(X, np.arange(300), 0.8, seed=4)
    c, _ = add_spurious_features(X, np.arange(300), 0.8, seed=5)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_spurious_independent_of_labels():
    X, y = _data(n=4000)
    X_new, mask = add_spurious_features(X, np.arange(3000), 1.0, seed=0)
    correlations = [abs(np.corrcoef(X_new[:, j], y)[0, 1]) for j in np.flatnonzero(mask)]
    real = [abs(np.corrcoef(X[:, j], y)[0, 1]) for j in range(X.shape[1])]
    assert max(correlations) < 0.06 < min(real)


def test_spurious_distribution_uses_training_rows_only():
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 4.0, size=(2000, 20)).astype(np.float32)
    X[1500:] += 1000.0  # test rows: far away, must not move the noise parameters
    X_new, mask = add_spurious_features(X, np.arange(1500), 1.0, seed=1)
    noise = X_new[:, mask]
    train = X[:1500]
    assert noise.mean() == pytest.approx(train.mean(), abs=0.05)
    assert noise.std() == pytest.approx((train.max() - train.min()) / 2, rel=0.02)


def test_spurious_ratio_zero_and_negative():
    X, _ = _data()
    X_new, mask = add_spurious_features(X, np.arange(10), 0.0, seed=0)
    np.testing.assert_array_equal(X_new, X)
    assert mask.shape == (10,) and not mask.any()
    with pytest.raises(DataError, match=">= 0"):
        add_spurious_features(X, np.arange(10), -0.1, seed=0)


def test_noise_ratios_specs():
    assert noise_ratios(3, 0.5) == [0.5, 0.5, 0.5]
    assert noise_ratios(2, [0.1, 0.0]) == [0.1, 0.0]
    assert noise_ratios(4, "uneven") == [0.8, 0.25, 0.1, 0.0]
    with pytest.raises(DataError, match="2 value.*3 parties"):
        noise_ratios(3, [0.1, 0.2])
    with pytest.raises(DataError, match="'uneven'.*exactly 4 parties, got 2"):
        noise_ratios(2, "uneven")
    with pytest.raises(DataError, match="unknown noise ratio spec 'loud'"):
        noise_ratios(2, "loud")
    with pytest.raises(DataError, match="party 1"):
        noise_ratios(2, [0.1, -1.0])


# --- scaling ---------------------------------------------------------------------------------


def test_minmax_fitted_on_train_rows_only():
    X = np.array([[0.0, 5.0], [10.0, 5.0], [5.0, 5.0], [20.0, 7.0]])
    train = np.array([0, 1, 2])
    scaled = minmax_scale(X, train)
    assert scaled.dtype == np.float32
    assert scaled[train].min() >= 0.0 and scaled[train].max() <= 1.0
    assert scaled[3, 0] == pytest.approx(2.0)  # 20 vs train range 0..10: no leakage
    assert np.isfinite(scaled).all()  # column 1 is constant on the train rows
    np.testing.assert_allclose(scaled[train, 1], 0.0)


def test_auto_scaling_takes_ranks_where_a_few_values_squash_a_column():
    from vflfs.datasets.scaling import scale_columns

    rng = np.random.default_rng(0)
    normal = rng.normal(size=1000)
    outliers = normal.copy()
    outliers[:5] *= 1000  # 0.5% gross outliers: min-max leaves the rest a sliver
    sparse = np.where(rng.random(1000) < 0.9, 0.0, rng.exponential(size=1000))
    sparse[0] = 500.0  # mostly one value: its spread is in the others, min-max kept
    X = np.column_stack([normal, np.exp(3 * normal), outliers, sparse])
    train = np.arange(800)
    auto, plain = scale_columns(X, train), scale_columns(X, train, "minmax")
    np.testing.assert_array_equal(plain, minmax_scale(X, train))
    for j in (0, 3):
        np.testing.assert_array_equal(auto[:, j], plain[:, j])
    for j in (1, 2):  # the empirical distribution function of the training rows
        ranks = np.argsort(np.argsort(X[train, j]))
        np.testing.assert_allclose(auto[train, j], (ranks + 0.5) / len(train), atol=1e-6)
        assert np.all(np.diff(auto[np.argsort(X[:, j]), j]) >= 0)  # order kept, all rows
    # a monotone transform of a squashed column leaves it as it was
    steeper = scale_columns(np.exp(5 * normal)[:, None], train)[:, 0]
    np.testing.assert_array_equal(auto[:, 1], steeper)
    below = np.array([[X[train, 1].min() - 1.0]])
    assert scale_columns(np.vstack([X[:, [1]], below]), train)[-1, 0] == 0.0
    with pytest.raises(ValueError, match="scaling must be one of"):
        scale_columns(X, train, "standard")


def test_minmax_rejects_bad_rows():
    with pytest.raises(DataError, match="out of range"):
        minmax_scale(np.zeros((3, 2)), np.array([0, 5]))


# --- party view ------------------------------------------------------------------------------


def test_build_party_data_takes_columns_adds_noise_then_scales():
    X, _ = _data(n=200, d=10)
    X[150:, 3] = 50.0  # large test values in column 3
    columns, train = np.array([1, 3, 7, 8]), np.arange(150)
    view = build_party_data(X, columns, train, noise_ratio=0.5, noise_seed=3)
    assert view.X.shape == (200, 6) and view.X.dtype == np.float32
    np.testing.assert_array_equal(view.columns, columns)
    np.testing.assert_array_equal(view.spurious, [False] * 4 + [True] * 2)
    assert view.X[train].min() >= 0.0 and view.X[train].max() <= 1.0 + 1e-6
    assert view.X[150:, 1].min() > 1.0
    again = build_party_data(X, columns, train, noise_ratio=0.5, noise_seed=3)
    np.testing.assert_array_equal(view.X, again.X)


def test_build_party_data_rejects_bad_columns():
    X, _ = _data(n=20, d=4)
    with pytest.raises(DataError, match="party columns.*out of range"):
        build_party_data(X, np.array([0, 9]), np.arange(10))
