"""benchmarks/sklearn_sets.py: the informative columns are found where the permutation put
them, and a run of the bring-your-own-data path reports its selection against them."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import make_classification

from benchmarks.sklearn_sets import SETS, SklearnSet, jobs, markdown, run

TINY = SklearnSet(
    "tiny", 2, dict(n_samples=300, n_features=12, n_informative=3, random_state=5), rescale=True
)


def test_the_relevant_columns_are_the_informative_ones_after_the_permutation(tmp_path):
    path, relevant = TINY.make(tmp_path)
    X = np.load(path)["X"]
    plain, _ = make_classification(
        n_samples=300,
        n_features=12,
        n_informative=3,
        n_redundant=0,
        n_repeated=0,
        shuffle=False,
        random_state=5,
    )
    # rescaled column by column: the informative columns are affine images of the originals
    matches = {
        col
        for j in range(3)
        for col in range(12)
        if abs(np.corrcoef(X[:, col], plain[:, j])[0, 1]) > 0.999
    }
    assert matches == set(relevant)
    assert len(set(relevant)) == 3 and relevant == sorted(relevant)
    assert len({s.name for s in SETS}) == len(SETS)


def test_a_radial_sets_informative_columns_are_its_generators_among_the_noise(tmp_path):
    """``make_gaussian_quantiles`` draws only informative columns: the set appends noise
    columns before the permutation, and the recorded relevant columns are the drawn ones."""
    radial = SklearnSet(
        "radial", 3, dict(n_samples=200, n_features=3, random_state=6), kind="quantiles", noise=9
    )
    path, relevant = radial.make(tmp_path)
    X, y = np.load(path)["X"], np.load(path)["y"]
    drawn, labels, informative = radial.draw()
    assert X.shape == (200, 12) and informative == 3 and np.array_equal(y, labels)
    matches = {
        c for j in range(3) for c in range(12) if np.allclose(X[:, c], drawn[:, j], atol=1e-6)
    }
    assert matches == set(relevant)


def test_a_run_reports_precision_and_recall_and_the_oracle_reads_the_informative_columns(
    tmp_path,
):
    runs = dict(jobs(TINY, tmp_path / "data", ["vfl"], ["training.epochs=3", "threads=1"]))
    assert set(runs) == {"vfl", "oracle_vfl"}
    row = run(runs["vfl"], tmp_path / "vfl")
    assert row["kept"] == row["of"] == 12 and row["recall"] == 1.0 and row["precision"] == 0.25
    oracle = run(runs["oracle_vfl"], tmp_path / "oracle")
    assert oracle["of"] == 3 and oracle["precision"] is None
    table = markdown([{"set": "tiny", "strategy": "vfl", **row}])
    assert "| tiny | vfl |" in table and "| 1.00 | 12 / 12 |" in table


def test_the_digits_set_keeps_the_pixels_that_vary_and_the_products_set_is_a_regression(
    tmp_path,
):
    """``digits``: the varying pixels of scikit-learn's 8x8 digits are the relevant columns
    among the noise. ``products``: a regression whose target is its stated function of the
    six drawn columns, none of which shows a trend alone."""
    digits = SklearnSet("digits", 4, dict(random_state=3), kind="digits", noise=20)
    path, relevant = digits.make(tmp_path)
    X = np.load(path)["X"]
    pixels, _, informative = digits.draw()
    assert informative == pixels.shape[1] == 61 and X.shape == (1797, 81)
    assert not digits.regression and len(relevant) == 61
    assert np.all(X[:, relevant].std(axis=0) > 0)
    assert {c for c in range(81) if np.all(np.isin(X[:, c], np.arange(17)))} == set(relevant)

    products = SklearnSet("products", 3, dict(n_samples=3000, random_state=4), kind="products")
    X, y, informative = products.draw()
    assert products.regression and informative == 6 and X.shape == (3000, 6)
    target = 2 * np.sin(X[:, 0]) * X[:, 1] + X[:, 2] ** 2 - X[:, 3] + 0.5 * X[:, 4] * X[:, 5]
    assert abs(np.std(y - target) - 0.3) < 0.02
    # no linear trend in the columns that matter only together or through a square
    for j in (0, 1, 2, 4, 5):
        assert abs(np.corrcoef(X[:, j], y)[0, 1]) < 0.05
    assert np.corrcoef(X[:, 3], y)[0, 1] < -0.3
