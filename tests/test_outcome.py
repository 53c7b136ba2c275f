"""How long a training waits, and when a run says it learned nothing."""

from __future__ import annotations

import pytest

from vflfs.ml.metrics import majority_margin
from vflfs.strategies import RunResult
from vflfs.strategies.vfl import VFL

from helpers import tiny_config


def history(best: int, last: int) -> RunResult:
    """Epochs 0 .. last, the best validation score at ``best``."""
    rows = [{"epoch": e, "val_metric": 0.9 if e == best else 0.5} for e in range(last + 1)]
    return RunResult("vfl", "accuracy", history=rows)


@pytest.mark.parametrize(
    ("epoch_steps", "waited", "over"),
    [(32, 2, True), (1, 2, False), (1, 49, False), (1, 50, True), (2, 25, True), (3, 16, False)],
)
def test_patience_waits_for_enough_optimiser_steps(epoch_steps, waited, over):
    """Two epochs of patience, and at least 50 optimiser steps: two epochs on a large table,
    fifty on a table of one batch."""
    strategy = VFL(tiny_config("training.patience_steps=50"))
    strategy.epoch_steps = epoch_steps
    assert strategy.patience_over(10 + waited, history(10, 10 + waited), 2) is over


def test_patience_steps_zero_counts_epochs_only():
    strategy = VFL(tiny_config("training.patience_steps=0"))
    assert strategy.patience_over(12, history(10, 12), 2)


def test_a_model_one_test_row_above_the_majority_class_learned_nothing():
    assert 0.389 + majority_margin(0.389, 36) >= 0.417  # one row of 36 above the majority
    assert majority_margin(0.5, 10_000) == 0.005  # on many rows the floor
    assert 0.5 + majority_margin(0.5, 600) < 0.57  # MADELON's all-features model learned
