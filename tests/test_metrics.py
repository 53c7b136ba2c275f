"""The scores of ml/metrics.py against sklearn's definitions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score

from vflfs.ml.metrics import score
from vflfs.ml.models import Task


@pytest.mark.parametrize("rows, classes", [(1, 2), (7, 3), (400, 2), (1234, 26)])
def test_accuracy_is_sklearns_to_the_bit(rows: int, classes: int) -> None:
    rng = np.random.default_rng(rows)
    y = rng.integers(0, classes, rows)
    out = torch.randn(rows, classes, generator=torch.Generator().manual_seed(rows))
    expected = accuracy_score(y, out.argmax(dim=1).numpy())
    task = Task("classification", classes)
    assert score(task, out, y) == expected
    assert score(task, out, y.reshape(-1, 1)) == expected  # a column of labels
    assert score(task, out.requires_grad_(), y) == expected  # a model's output
