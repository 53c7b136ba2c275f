"""The teacher dataset: shape, determinism, labels read only the relevant columns, learnable."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier

from vflfs.datasets import DataError, load_dataset

pytestmark = pytest.mark.usefixtures("fresh_dataset_cache")


def teacher(**params):
    return load_dataset("teacher", **params)


def test_shape_classes_and_relevant_columns():
    ds = teacher(n_samples=900, n_features=60, n_classes=4, n_relevant=7, seed=3)
    assert ds.X.shape == (900, 60) and ds.X.dtype == np.float32
    assert ds.task == "classification" and ds.n_classes == 4
    assert ds.relevant.tolist() == sorted(set(ds.relevant.tolist())) and len(ds.relevant) == 7
    assert ds.relevant.min() >= 0 and ds.relevant.max() < 60
    shares = np.bincount(ds.y, minlength=4) / 900
    assert shares.min() > 0.15 and shares.max() < 0.35, shares  # about balanced
    assert abs(float(ds.X.mean())) < 0.05 and abs(float(ds.X.std()) - 1) < 0.05


def test_same_seed_same_data_other_seed_other_data():
    a, b = teacher(seed=1), teacher(seed=1)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert np.array_equal(a.relevant, b.relevant)
    c = teacher(seed=2)
    assert not np.array_equal(a.X, c.X) and not np.array_equal(a.y, c.y)


def test_labels_depend_only_on_the_relevant_columns():
    """Other column counts and placements move or redraw the noise columns, never the
    relevant columns' values or the labels."""
    base = teacher(n_features=30, relevant_placement="first", seed=5)
    for params in (
        {"n_features": 30, "relevant_placement": "random"},
        {"n_features": 80, "relevant_placement": "spread"},
        {"n_features": 200, "relevant_placement": "random", "relevant_within": 40},
    ):
        other = teacher(seed=5, **params)
        assert np.array_equal(other.X[:, other.relevant], base.X[:, base.relevant])
        assert np.array_equal(other.y, base.y)
        if other.n_features != base.n_features:  # other noise columns, the same labels
            noise = np.setdiff1d(np.arange(other.n_features), other.relevant)
            assert not np.array_equal(other.X[:, noise[:20]], base.X[:, 10:30])


def test_label_noise_changes_about_its_share_of_labels():
    ds = teacher(n_samples=500, n_features=30, n_classes=3, n_relevant=4, label_noise=0.0)
    noisy = teacher(n_samples=500, n_features=30, n_classes=3, n_relevant=4, label_noise=0.3)
    changed = (noisy.y != ds.y).mean()
    assert 0.12 < changed < 0.3  # 0.3 x 2/3 expected


def test_an_oracle_on_the_relevant_columns_is_accurate():
    """A small model on the relevant columns comes close to the best possible accuracy (about
    0.975 with 5% label noise); on as many noise columns it is at chance."""
    ds = teacher(n_samples=3000, n_features=50, n_classes=2, n_relevant=5, label_noise=0.05)

    def accuracy(columns: np.ndarray) -> float:
        Xtr, Xte, ytr, yte = train_test_split(ds.X[:, columns], ds.y, random_state=0)
        return KNeighborsClassifier(15).fit(Xtr, ytr).score(Xte, yte)

    assert 0.85 < accuracy(ds.relevant) < 0.99
    assert accuracy(np.setdiff1d(np.arange(50), ds.relevant)[:5]) < 0.6


@pytest.mark.parametrize(
    ("placement", "within", "expected"),
    [("first", None, [0, 1, 2, 3]), ("spread", 40, [0, 10, 20, 30]), ("random", 12, None)],
)
def test_relevant_placement(placement, within, expected):
    ds = teacher(n_features=100, n_relevant=4, relevant_placement=placement, relevant_within=within)
    if expected is not None:
        assert ds.relevant.tolist() == expected
    else:
        assert ds.relevant.max() < 12


def test_only_relevant_gives_the_same_rows_and_labels():
    full = teacher(relevant_within=50, seed=4)
    oracle = teacher(relevant_within=50, seed=4, only_relevant=True)
    assert np.array_equal(oracle.X, full.X[:, full.relevant])
    assert np.array_equal(oracle.y, full.y)
    assert oracle.relevant.tolist() == list(range(len(full.relevant)))


def test_mixed_distributions_are_standardised():
    ds = teacher(n_samples=4000, n_features=40, distribution="mixed")
    assert np.allclose(ds.X.mean(axis=0), 0, atol=0.1)
    assert np.allclose(ds.X.std(axis=0), 1, atol=0.1)
    binary = [j for j in range(40) if np.unique(ds.X[:, j]).size == 2]
    assert 0 < len(binary) < 40


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n_relevant": 200}, "n_relevant \\(200\\) <= relevant_within"),
        ({"relevant_within": 5}, "n_relevant \\(10\\) <= relevant_within \\(5\\)"),
        ({"relevant_placement": "last"}, "unknown relevant_placement 'last'"),
        ({"n_classes": 1}, "n_classes must be >= 2"),
        ({"label_noise": 1.0}, "label_noise must lie in"),
        ({"distribution": "cauchy"}, "unknown distribution 'cauchy'"),
    ],
)
def test_bad_parameters_are_named(params, message):
    with pytest.raises(DataError, match=message):
        teacher(**params)
