"""Tests for column splits (vflfs.datasets.splits) and sample splits / k-fold."""

from __future__ import annotations

import numpy as np
import pytest

from vflfs.datasets import DataError, SampleSplits, kfold_splits, split_columns, split_samples


def _assert_partition(parts: list[np.ndarray], n: int) -> None:
    joined = np.concatenate(parts)
    assert joined.size == n, "every column exactly once"
    np.testing.assert_array_equal(np.sort(joined), np.arange(n))
    assert all(p.dtype == np.int64 for p in parts)


# --- column splits ---------------------------------------------------------------------------


def test_even_split_is_contiguous_and_balanced():
    parts = split_columns(10, 3)
    _assert_partition(parts, 10)
    assert [p.size for p in parts] == [4, 3, 3]
    assert all(np.all(np.diff(p) == 1) for p in parts)
    np.testing.assert_array_equal(parts[0], [0, 1, 2, 3])


def test_random_split_is_seeded_sorted_and_balanced():
    a = split_columns(50, 4, kind="random", seed=7)
    b = split_columns(50, 4, kind="random", seed=7)
    c = split_columns(50, 4, kind="random", seed=8)
    _assert_partition(a, 50)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))
    assert all(np.all(np.diff(p) > 0) for p in a)
    sizes = [p.size for p in a]
    assert max(sizes) - min(sizes) <= 1
    assert not np.array_equal(a[0], np.arange(a[0].size)), "random must not be contiguous"


def test_sizes_split():
    parts = split_columns(10, 3, kind="sizes", sizes=[2, 5, 3])
    _assert_partition(parts, 10)
    np.testing.assert_array_equal(parts[1], [2, 3, 4, 5, 6])


def test_sizes_that_do_not_add_up_name_sum_and_expected():
    with pytest.raises(DataError, match="add up to 9.*10 columns"):
        split_columns(10, 3, kind="sizes", sizes=[2, 4, 3])
    with pytest.raises(DataError, match="one count per party"):
        split_columns(10, 3, kind="sizes", sizes=[5, 5])
    with pytest.raises(DataError, match="party 1 has no columns"):
        split_columns(10, 3, kind="sizes", sizes=[5, 0, 5])


def test_columns_split_keeps_given_lists():
    parts = split_columns(5, 2, kind="columns", columns=[[4, 0], [1, 2, 3]])
    _assert_partition(parts, 5)
    np.testing.assert_array_equal(parts[0], [4, 0])


def test_columns_split_errors_say_which_columns():
    with pytest.raises(DataError, match=r"columns \[7\] are out of range 0..4"):
        split_columns(5, 2, kind="columns", columns=[[0, 1, 7], [2, 3, 4]])
    with pytest.raises(DataError, match=r"column 2 to parties \[0, 1\]"):
        split_columns(5, 2, kind="columns", columns=[[0, 1, 2], [2, 3, 4]])
    with pytest.raises(DataError, match=r"columns \[3\] are missing"):
        split_columns(5, 2, kind="columns", columns=[[0, 1], [2, 4]])
    with pytest.raises(DataError, match="one index list per party"):
        split_columns(5, 2, kind="columns")
    with pytest.raises(DataError, match="party 1 has no columns"):
        split_columns(3, 2, kind="columns", columns=[[0, 1, 2], []])


def test_image_rows_split_cuts_horizontal_bands():
    parts = split_columns(32 * 32, 4, kind="image-rows", image_shape=(32, 32))
    _assert_partition(parts, 1024)
    assert [p.size for p in parts] == [256] * 4
    np.testing.assert_array_equal(parts[0], np.arange(256))
    uneven = split_columns(4 * 3, 3, kind="image-rows", image_shape=(4, 3))
    np.testing.assert_array_equal(uneven[0], [0, 1, 2, 3, 4, 5])  # rows 0-1
    np.testing.assert_array_equal(uneven[2], [9, 10, 11])  # row 3


def test_image_rows_errors():
    with pytest.raises(DataError, match="needs image_shape"):
        split_columns(1024, 2, kind="image-rows")
    with pytest.raises(DataError, match="1024 pixels but the data has 1000 columns"):
        split_columns(1000, 2, kind="image-rows", image_shape=(32, 32))
    with pytest.raises(DataError, match="party 4 has no columns"):
        split_columns(12, 5, kind="image-rows", image_shape=(4, 3))


def test_party_with_no_columns_and_bad_counts():
    with pytest.raises(DataError, match="party 3 has no columns"):
        split_columns(3, 4)
    with pytest.raises(DataError, match="n_parties must be at least 1"):
        split_columns(3, 0)


def test_unknown_kind_lists_kinds():
    with pytest.raises(DataError, match="unknown column split kind 'diagonal'.*image-rows"):
        split_columns(10, 2, kind="diagonal")


# --- sample splits ---------------------------------------------------------------------------


def _labels(n: int = 500) -> np.ndarray:
    return (np.arange(n) % 5 == 0).astype(np.int64)  # 20 % positives


def _assert_disjoint_cover(s: SampleSplits, n: int) -> None:
    joined = np.concatenate([s.train, s.val, s.test])
    assert joined.size == n
    np.testing.assert_array_equal(np.sort(joined), np.arange(n))
    for part in (s.train, s.val, s.test):
        assert part.dtype == np.int64 and np.all(np.diff(part) > 0)


def test_split_samples_disjoint_cover_and_sizes():
    s = split_samples(500, _labels(), seed=0, test_fraction=0.2, val_fraction=0.25)
    _assert_disjoint_cover(s, 500)
    assert (s.test.size, s.val.size, s.train.size) == (100, 100, 300)


def test_split_samples_stratified_proportions():
    y = _labels()
    s = split_samples(500, y, seed=3)
    for part in (s.train, s.val, s.test):
        assert y[part].mean() == pytest.approx(0.2, abs=0.01)


def test_split_samples_seeded():
    a = split_samples(200, None, seed=1)
    b = split_samples(200, None, seed=1)
    c = split_samples(200, None, seed=2)
    np.testing.assert_array_equal(a.test, b.test)
    np.testing.assert_array_equal(a.val, b.val)
    assert not np.array_equal(a.test, c.test)


def test_split_samples_regression_labels_are_not_stratified():
    y = np.linspace(0, 1, 100).astype(np.float32)
    _assert_disjoint_cover(split_samples(100, y, seed=0), 100)


def test_split_samples_respects_official_split():
    y = _labels(100)
    train_idx, test_idx = np.arange(30, 100), np.arange(30)
    s = split_samples(100, y, seed=0, val_fraction=0.2, train_idx=train_idx, test_idx=test_idx)
    np.testing.assert_array_equal(s.test, test_idx)
    np.testing.assert_array_equal(np.union1d(s.train, s.val), train_idx)
    assert s.val.size == 14 and np.intersect1d(s.train, s.val).size == 0


def test_split_samples_errors():
    with pytest.raises(DataError, match="test_fraction must be in"):
        split_samples(100, None, seed=0, test_fraction=1.5)
    with pytest.raises(DataError, match="both train_idx and test_idx"):
        split_samples(100, None, seed=0, train_idx=np.arange(50))
    with pytest.raises(DataError, match="share 1 row"):
        split_samples(10, None, seed=0, train_idx=np.arange(6), test_idx=np.arange(5, 10))
    with pytest.raises(DataError, match="val_fraction=0.5 of 1 rows"):
        split_samples(2, None, seed=0, test_fraction=0.5, val_fraction=0.5)
    with pytest.raises(DataError, match="9 labels for 10 rows"):
        split_samples(10, np.zeros(9, dtype=np.int64), seed=0)


def test_split_samples_with_a_class_too_small_to_stratify(caplog):
    # A class of one row cannot be on both sides of scikit-learn's stratified split: the rows
    # are drawn class by class, the small class's row stays on the training side.
    y = np.array([0] * 9 + [1])
    with caplog.at_level("WARNING", logger="vflfs"):
        s = split_samples(10, y, seed=0)
    _assert_disjoint_cover(s, 10)
    assert (s.test.size, s.val.size, s.train.size) == (2, 2, 6)
    assert 9 in s.train
    assert "too few for a stratified split" in caplog.text
    again = split_samples(10, y, seed=0)
    np.testing.assert_array_equal(s.val, again.val)
    np.testing.assert_array_equal(s.test, again.test)


def test_split_samples_draws_fewer_rows_than_classes_class_by_class():
    # 9 classes of 8-9 rows; 8 validation rows cannot hold one of each class: the largest
    # classes give one each, every class keeps rows for training.
    y = np.repeat(np.arange(9), [9, 9, 9, 9, 9, 9, 9, 9, 8])
    s = split_samples(y.size, y, seed=1, test_fraction=0.2, val_fraction=0.12)
    _assert_disjoint_cover(s, y.size)
    assert s.val.size == 8
    assert np.unique(y[s.val]).size == 8
    assert set(np.unique(y[s.train])) == set(range(9))


def test_split_samples_without_validation():
    s = split_samples(50, None, seed=0, val_fraction=0.0)
    assert s.val.size == 0
    _assert_disjoint_cover(s, 50)


# --- k-fold ----------------------------------------------------------------------------------


def test_kfold_test_sets_are_disjoint_and_cover_all_rows():
    y = _labels(200)
    folds = kfold_splits(200, y, k=5, seed=0)
    assert len(folds) == 5
    tests = np.concatenate([f.test for f in folds])
    np.testing.assert_array_equal(np.sort(tests), np.arange(200))
    for fold in folds:
        _assert_disjoint_cover(fold, 200)
        assert fold.test.size == 40
        assert y[fold.test].mean() == pytest.approx(0.2, abs=0.01)


def test_kfold_seeded_and_unstratified():
    a = kfold_splits(100, None, k=4, seed=5)
    b = kfold_splits(100, None, k=4, seed=5)
    c = kfold_splits(100, None, k=4, seed=6)
    assert all(np.array_equal(x.test, z.test) for x, z in zip(a, b, strict=True))
    assert not np.array_equal(a[0].test, c[0].test)


def test_kfold_bad_k():
    with pytest.raises(DataError, match="2 <= k <= n"):
        kfold_splits(10, None, k=1, seed=0)
    with pytest.raises(DataError, match="2 <= k <= n"):
        kfold_splits(10, None, k=11, seed=0)
