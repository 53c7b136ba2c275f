"""benchmarks/centralised.py: scikit-learn references on a table's stratified folds."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import make_classification

from benchmarks.centralised import fold_scores, main

from helpers import save_npz


def table(tmp_path):
    """A separable 3-class table: 3 informative columns among 20."""
    X, y = make_classification(
        n_samples=120,
        n_features=20,
        n_informative=3,
        n_redundant=0,
        n_classes=3,
        n_clusters_per_class=1,
        class_sep=2.0,
        random_state=0,
    )
    return save_npz(tmp_path / "t3.npz", X=X, y=y), X, y


def test_the_references_learn_a_separable_table_and_the_lasso_drops_noise_columns(tmp_path):
    path, X, y = table(tmp_path)
    scores, kept = fold_scores(X, y, "l1_logistic_cv", folds=3, seed=0)
    assert len(scores) == 3 and min(scores) > 0.8  # chance is a third
    # its columns kept per fold; where every C classifies the fold alike it may keep them all
    assert len(kept) == 3 and sorted(kept)[1] <= 5 and all(1 <= k <= 20 for k in kept)
    out = tmp_path / "out"
    main(
        [
            str(path),
            "--models",
            "logistic",
            "mlp_no_early_stopping",
            "--folds",
            "3",
            "--out",
            str(out),
        ]
    )
    rows = json.loads((out / "centralised.json").read_text())
    assert rows[0]["table"] == "t3" and rows[0]["rows"] == 120 and rows[0]["columns"] == 20
    logistic = rows[0]["models"]["logistic"]
    assert len(logistic["folds"]) == 3 and logistic["mean"] > 0.8 and logistic["kept"] is None
    assert "| t3 |" in (out / "centralised.md").read_text()


def test_a_table_without_labels_is_refused_by_name(tmp_path):
    path = save_npz(tmp_path / "bad.npz", X=np.zeros((4, 2)))
    with pytest.raises(SystemExit, match="needs arrays X and y"):
        main([str(path)])


def test_a_model_that_cannot_fit_a_table_is_marked_failed_and_the_others_go_on(tmp_path, caplog):
    # A class of two rows: some of the L1 model's inner folds hold none of it.
    X, y = make_classification(n_samples=60, n_features=8, n_informative=3, random_state=0)
    y[:2] = 2
    path = save_npz(tmp_path / "small.npz", X=X, y=y)
    out = tmp_path / "out"
    models = ["logistic", "l1_logistic_cv", "mlp_no_early_stopping"]
    with caplog.at_level("WARNING", logger="vflfs"):
        main([str(path), "--models", *models, "--out", str(out)])
    assert "too few for a stratified split" in caplog.text
    models = json.loads((out / "centralised.json").read_text())[0]["models"]
    assert "at least 2 classes" in models["l1_logistic_cv"]["error"]
    assert len(models["logistic"]["folds"]) == 5
    # a fold's training rows hold one row of the small class: drawn class by class
    assert len(models["mlp_no_early_stopping"]["folds"]) == 5
    assert "| small | " in (out / "centralised.md").read_text()
    assert "failed" in (out / "centralised.md").read_text()
