"""A party keeps its columns row-major, so that gathering a batch's rows reads contiguous memory.

A party's data view is a column slice of the dataset (``X[:, columns]``), which numpy returns
column-major; gathering rows from that layout took ~20x as long on MADELON's parties.
"""

from __future__ import annotations

import numpy as np
import torch

from vflfs.client_app.party import Party
from vflfs.datasets import build_party_data

from helpers import small_party


def party_on_a_column_slice() -> tuple[Party, np.ndarray]:
    X = np.random.default_rng(0).random((40, 12)).astype(np.float32)
    rows = np.arange(30)
    data = build_party_data(X, np.arange(2, 10), rows)
    assert not data.X.flags["C_CONTIGUOUS"]  # the layout the party is given
    return small_party(data, {"name": "adam", "lr": 0.01}, train_rows=rows), data.X


def test_a_party_holds_its_columns_row_major_before_and_after_it_drops_some():
    party, given = party_on_a_column_slice()
    assert party.X.is_contiguous()
    batch = np.array([3, 17, 5])
    centred = given - given[:30].mean(axis=0, dtype=np.float64).astype(np.float32)
    assert torch.equal(party._rows(batch), torch.from_numpy(centred[batch]))
    party.keep(features=np.array([1, 4, 6]))
    assert party.X.is_contiguous()
    assert torch.equal(party._rows(batch), torch.from_numpy(centred[batch][:, [1, 4, 6]]))
