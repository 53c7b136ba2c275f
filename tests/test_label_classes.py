"""The labels file's classes: declared or inferred, counted, rare values named by their value."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from vflfs.datasets import DataError
from vflfs.datasets.label_classes import check_classes, default_min_count
from vflfs.datasets.party_files import load_labels_file
from vflfs.runtime.config import compose_config
from vflfs.server_app.experiment import Experiment


def labels_csv(tmp_path, y: list, name: str = "labels.csv") -> str:
    path = tmp_path / name
    pd.DataFrame({"id": [f"s{i}" for i in range(len(y))], "y": y}).to_csv(path, index=False)
    return str(path)


def test_inferred_classes_are_logged_with_their_counts(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="vflfs"):
        labels = load_labels_file(labels_csv(tmp_path, ["spam"] * 30 + ["ham"] * 50))
    assert labels.classes == ["ham", "spam"] and labels.labels.n_classes == 2
    assert labels.labels.y.tolist() == [1] * 30 + [0] * 50
    assert "labels.csv: 2 classes inferred (rows per class: ham: 50, spam: 30)" in caplog.text


def test_three_stray_rows_name_the_raw_value(tmp_path):
    path = labels_csv(tmp_path, [0, 1] * 100 + [2] * 3)
    with pytest.raises(DataError, match=r"label value '2' appears in 3 row\(s\) of labels.csv"):
        load_labels_file(path)
    spam = labels_csv(tmp_path, ["0", "1"] * 100 + ["spam"], "spam.csv")
    with pytest.raises(
        DataError, match=r"label value 'spam' appears in 1 row\(s\).*dataset.classes"
    ):
        load_labels_file(spam)
    assert load_labels_file(path, min_class_count=3).labels.n_classes == 3


def test_declared_classes_set_the_ids_and_refuse_other_values(tmp_path, caplog):
    path = labels_csv(tmp_path, ["ham"] * 40 + ["spam"] * 3)
    labels = load_labels_file(path, classes=["spam", "ham"])  # rare but declared
    assert labels.labels.y.tolist() == [1] * 40 + [0] * 3 and labels.classes == ["spam", "ham"]
    assert "declared class 'spam' has only 3 row(s)" in caplog.text
    typo = labels_csv(tmp_path, ["ham"] * 40 + ["spam"] * 30 + ["Spam"] * 2, "typo.csv")
    with pytest.raises(DataError, match=r"label value 'Spam' appears in 2 row\(s\).*not among"):
        load_labels_file(typo, classes=["ham", "spam"])
    with pytest.raises(DataError, match=r"declared class\(es\) \['eggs'\] appear in no row"):
        load_labels_file(path, classes=["ham", "spam", "eggs"])


def test_values_compare_as_text_with_integral_floats_as_integers():
    found = check_classes("f", np.asarray([1.0, 0.0, 1.0] * 5), declared=[0, 1])
    assert found.y.tolist() == [1, 0, 1] * 5 and found.names == ["0", "1"]
    numeric = check_classes("f", np.asarray([10, 9, 10] * 5), min_count=1)  # numeric order
    assert numeric.names == ["9", "10"] and numeric.y.tolist() == [1, 0, 1] * 5


def test_a_continuous_label_column_names_the_regression_task(tmp_path):
    prices = labels_csv(tmp_path, [12.5, 3.25, 7.0, 8.75] * 20)
    with pytest.raises(
        DataError, match=r"fractional numbers \(e.g. 12.5\).*dataset.task=regression"
    ):
        load_labels_file(prices)
    assert load_labels_file(prices, task="regression").labels.task == "regression"


def test_default_threshold():
    assert default_min_count(100) == 10 and default_min_count(10_000) == 10
    assert default_min_count(1_000_000) == 1000


def test_the_run_config_declares_the_classes(tmp_path):
    path = labels_csv(tmp_path, ["ham"] * 40 + ["spam"] * 3)
    base = f"dataset=party_files dataset.labels_path={path}"
    with pytest.raises(DataError, match="label value 'spam' appears in 3"):
        Experiment.from_config(compose_config(base))
    experiment = Experiment.from_config(compose_config(f"{base} dataset.classes=[ham,spam]"))
    assert experiment.task.n_classes == 2 and experiment.labels.classes == ["ham", "spam"]
    loose = Experiment.from_config(compose_config(f"{base} dataset.min_class_count=2"))
    assert loose.labels.classes == ["ham", "spam"]
