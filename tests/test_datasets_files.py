"""Tests for vflfs.datasets user-file loaders (npz, csv, parquet) and validation errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vflfs.datasets import DataError, load_dataset

from helpers import save_npz, small_xy

pytestmark = pytest.mark.usefixtures("fresh_dataset_cache")


# --- user files ------------------------------------------------------------------------------


def test_npz_user_file_absolute_and_relative(tmp_path):
    X, y = small_xy()
    save_npz(tmp_path / "mine.npz", X=X, y=y * 5 + 3, train_idx=np.arange(15), test_idx=[15, 16])
    a = load_dataset("npz", path=str(tmp_path / "mine.npz"))
    b = load_dataset("npz", data_dir=str(tmp_path), path="mine.npz")
    assert a.X.shape == b.X.shape == (20, 4)
    assert set(a.y.tolist()) == {0, 1} and a.n_classes == 2  # 3, 8 recoded
    np.testing.assert_array_equal(a.test_idx, [15, 16])


def test_npz_user_file_regression_and_bad_keys(tmp_path):
    X, _ = small_xy()
    target = X.sum(axis=1)
    save_npz(tmp_path / "r.npz", X=X, y=target)
    ds = load_dataset("npz", path=str(tmp_path / "r.npz"), task="regression")
    assert ds.task == "regression" and ds.n_classes == 0
    np.testing.assert_allclose(ds.y, target.astype(np.float32))
    save_npz(tmp_path / "bad.npz", features=X, y=target)
    with pytest.raises(DataError, match=r"lacks the key.*'X'"):
        load_dataset("npz", path=str(tmp_path / "bad.npz"))
    with pytest.raises(DataError, match="unknown task"):
        load_dataset("npz", path=str(tmp_path / "r.npz"), task="ranking")


def _write_csv(path: Path, **columns: list) -> str:
    pd.DataFrame(columns).to_csv(path, index=False)
    return str(path)


def test_csv_recodes_string_labels(tmp_path):
    path = _write_csv(
        tmp_path / "t.csv", a=[1.0, 2, 3, 4], b=[0, 1, 0, 1], label=["dog", "cat", "dog", "eel"]
    )
    ds = load_dataset("csv", path=path, label_column="label")
    assert ds.X.shape == (4, 2) and ds.X.dtype == np.float32
    np.testing.assert_array_equal(ds.y, [1, 0, 1, 2])  # cat=0, dog=1, eel=2
    assert ds.n_classes == 3


def test_csv_drop_columns_and_regression(tmp_path):
    path = _write_csv(tmp_path / "t.csv", id=["x", "y", "z"], a=[1, 2, 3], t=[0.5, 1.5, 2.5])
    ds = load_dataset("csv", path=path, label_column="t", task="regression", drop_columns=["id"])
    assert ds.X.shape == (3, 1)
    np.testing.assert_allclose(ds.y, [0.5, 1.5, 2.5])


def test_csv_label_column_errors_list_available_columns(tmp_path):
    path = _write_csv(tmp_path / "t.csv", a=[1, 2], b=[0, 1])
    with pytest.raises(DataError, match=r"'target' is not in the header.*\['a', 'b'\]"):
        load_dataset("csv", path=path, label_column="target")
    with pytest.raises(DataError, match=r"label_column.*\['a', 'b'\]"):
        load_dataset("csv", path=path)


def test_csv_non_numeric_and_missing_features_are_named(tmp_path):
    path = _write_csv(tmp_path / "t.csv", a=[1, 2], colour=["red", "blue"], y=[0, 1])
    with pytest.raises(DataError, match=r"\['colour'\] are not numeric"):
        load_dataset("csv", path=path, label_column="y")
    path = _write_csv(tmp_path / "m.csv", a=[1, 2], b=[1.0, None], y=[0, 1])
    with pytest.raises(DataError, match=r"\['b'\] have missing values"):
        load_dataset("csv", path=path, label_column="y")


def test_parquet_user_file(tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "t.parquet"
    pd.DataFrame({"a": [1.0, 2.0, 3.0], "y": ["p", "q", "p"]}).to_parquet(path)
    ds = load_dataset("parquet", path=str(path), label_column="y")
    np.testing.assert_array_equal(ds.y, [0, 1, 0])


# --- validation errors -----------------------------------------------------------------------


def _load_arrays(tmp_path: Path, X: np.ndarray, y: np.ndarray, task: str = "classification"):
    return load_dataset("npz", path=str(save_npz(tmp_path / "v.npz", X=X, y=y)), task=task)


def test_nan_in_X_reports_count_and_first_column(tmp_path):
    X, y = small_xy()
    X[3, 2] = X[5, 2] = X[7, 3] = np.nan
    with pytest.raises(DataError, match=r"X has 3 NaN and 0 infinite.*column 2"):
        _load_arrays(tmp_path, X, y)


def test_inf_in_X_and_y_is_reported(tmp_path):
    X, y = small_xy()
    X[0, 1] = np.inf
    with pytest.raises(DataError, match=r"X has 0 NaN and 1 infinite.*column 1"):
        _load_arrays(tmp_path, X, y)
    X, _ = small_xy()
    target = X.sum(axis=1)
    target[4] = -np.inf
    with pytest.raises(DataError, match=r"y has 0 NaN and 1 infinite.*row 4"):
        _load_arrays(tmp_path, X, target, task="regression")


def test_nan_label_is_reported(tmp_path):
    X, _ = small_xy()
    y = np.ones(20)
    y[:10] = 0
    y[6] = np.nan
    with pytest.raises(DataError, match=r"1 missing/NaN label.*row 6"):
        _load_arrays(tmp_path, X, y)


def test_row_count_mismatch(tmp_path):
    X, y = small_xy()
    with pytest.raises(DataError, match="X has 20 rows but y has 19"):
        _load_arrays(tmp_path, X, y[:19])


def test_empty_data(tmp_path):
    with pytest.raises(DataError, match="is empty"):
        _load_arrays(tmp_path, np.zeros((0, 3)), np.zeros(0, dtype=np.int64))


def test_a_continuous_target_under_classification_is_named(tmp_path):
    """Fractional labels, or a distinct label per row, read as a regression target: the error
    names the task setting (not a stratified split's failure on 20 classes of one row)."""
    X, _ = small_xy()
    with pytest.raises(DataError, match=r"fractional numbers.*task=regression"):
        _load_arrays(tmp_path, X, np.linspace(0.0, 1.0, 20))
    with pytest.raises(DataError, match=r"20 distinct values in 20 rows.*task=regression"):
        _load_arrays(tmp_path, X, np.arange(20))
    assert _load_arrays(tmp_path, X, np.repeat([0.0, 1.0], 10)).n_classes == 2  # 0.0, 1.0


def test_single_class(tmp_path):
    X, _ = small_xy()
    with pytest.raises(DataError, match="1 class.*at least 2"):
        _load_arrays(tmp_path, X, np.zeros(20, dtype=np.int64))
