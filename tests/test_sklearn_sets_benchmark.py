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
