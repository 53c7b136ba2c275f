"""Row index sets packed for ``context.state`` (client_app/row_sets.py)."""

from __future__ import annotations

import numpy as np
import pytest

from vflfs.client_app.row_sets import pack_rows, runs, unpack_rows
from vflfs.datasets.sample_splits import split_samples


@pytest.mark.parametrize(
    "rows",
    [
        [],
        [7],
        [0, 1, 2, 3, 9],
        [5, 9, 2, 4, 4, 100],  # three runs; a repeated row starts a new one
        [3, 10_000_000],  # sparse: kept as int64
        [2**40, 2**40 + 3],
    ],
)
def test_rows_come_back_exactly_in_their_order(rows):
    rows = np.asarray(rows, dtype=np.int64)
    packed = pack_rows(rows)
    assert packed.dtype == np.uint8
    back = unpack_rows(packed)
    assert back.dtype == np.int64 and back.tolist() == rows.tolist()


def test_a_split_of_a_million_rows_packs_to_a_bit_per_row():
    labels = np.random.default_rng(0).integers(0, 3, 1_000_000)
    splits = split_samples(labels.size, labels, seed=0)
    evaluation = np.concatenate([splits.val, splits.test])
    assert len(runs(evaluation)) == 2
    packed = [pack_rows(rows) for rows in (splits.train, evaluation)]
    # 8 bytes per row -> a bit per row of each run's range (7.6 MB -> 0.37 MB)
    assert sum(p.nbytes for p in packed) <= (splits.train.nbytes + evaluation.nbytes) / 20
    assert np.array_equal(unpack_rows(packed[0]), splits.train)
    assert np.array_equal(unpack_rows(packed[1]), evaluation)


def test_plain_int64_rows_are_read_as_they_are():
    rows = np.array([4, 1, 8], dtype=np.int64)
    assert unpack_rows(rows).tolist() == [4, 1, 8]


def test_negative_rows_are_refused():
    with pytest.raises(ValueError, match="non-negative"):
        pack_rows(np.array([1, -2]))
