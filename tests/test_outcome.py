"""How long a training waits, and when a run says it learned nothing."""

from __future__ import annotations

import pytest

from vflfs.ml.metrics import majority_margin
from vflfs.strategies import RunResult
from vflfs.strategies.vfl import VFL

from helpers import tiny_config


def history(best: int, last: int, lowest_loss: int | None = None) -> RunResult:
    """Epochs 0 .. last, the best validation score at ``best``, the validation loss falling
    until ``lowest_loss`` (default: ``best``) and rising after it."""
    low = best if lowest_loss is None else lowest_loss
    rows = [
        {"epoch": e, "val_metric": 0.9 if e == best else 0.5, "val_loss": 1.0 + abs(e - low)}
        for e in range(last + 1)
    ]
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


def test_the_reported_epoch_breaks_a_tie_by_the_lowest_validation_loss():
    """Epochs 2, 4 and 6 tie on the best score: the reported one is 4, whose validation loss
    is lowest (ties of that too: the earliest); patience counts from the first of them, 2."""
    losses = {2: 0.6, 4: 0.3, 6: 0.3}
    rows = [
        {"epoch": e, "val_metric": 0.9 if e in losses else 0.5, "val_loss": losses.get(e, 0.1)}
        for e in range(8)
    ]
    result = RunResult("vfl", "accuracy", history=rows)
    assert result.best["epoch"] == 4 and result.first_best["epoch"] == 2
    strategy = VFL(tiny_config("training.patience_steps=0"))
    assert strategy.patience_over(4, result, 2) and not strategy.patience_over(3, result, 2)
    rows[4]["val_loss"] = rows[6]["val_loss"] = float("nan")  # a NaN loss never wins a tie
    assert result.best["epoch"] == 2
    result.best_from = 5  # the window of a later model
    assert result.best["epoch"] == result.first_best["epoch"] == 6


def test_a_path_keeps_its_warm_ups_first_best_epoch():
    """The path starts from the warm-up's first epoch at its best score (its selection is
    kept then): the same epochs and penalties as before ties broke by the loss."""
    from vflfs.strategies.stg import STG

    rows = [
        {"epoch": e, "val_metric": 0.9 if e else 0.5, "val_loss": 1.0 - e / 10} for e in range(4)
    ]
    result = RunResult("stg", "accuracy", history=rows)
    strategy = STG(tiny_config("strategy=stg"))
    strategy.stage = "warmup"
    assert strategy.reported_row(result)["epoch"] == 1
    strategy.stage = "path"
    assert (
        strategy.reported_row(result)["epoch"]
        == 3
        == VFL(tiny_config()).reported_row(result)["epoch"]
    )


def test_patience_steps_zero_counts_epochs_only():
    strategy = VFL(tiny_config("training.patience_steps=0"))
    assert strategy.patience_over(12, history(10, 12), 2)


def test_patience_waits_while_the_validation_loss_still_falls():
    """On imbalanced classes the accuracy stays at the majority rate for epochs while the
    loss falls: until the model beats the majority class, patience counts from the later of
    the best score and the lowest loss."""
    strategy = VFL(tiny_config("training.patience_steps=0"))
    strategy.majority_level = 0.9  # the best score (0.9) is the majority class's
    assert not strategy.patience_over(13, history(10, 13, lowest_loss=12), 2)
    assert strategy.patience_over(14, history(10, 14, lowest_loss=12), 2)
    assert strategy.patience_over(12, history(10, 12, lowest_loss=3), 2)
    strategy.majority_level = 0.8  # a model that has learned: its score alone counts
    assert strategy.patience_over(13, history(10, 13, lowest_loss=12), 2)


def test_a_warm_up_waits_as_a_dense_run_would_until_the_model_has_learned():
    """A stage that ends soon after the model has learned (the path's warm-up, LESS-VFL's
    pre-training: ``learned_above``) waits ``training.patience`` epochs while its best score
    is no better than that, then its own patience alone."""
    strategy = VFL(tiny_config("training.patience_steps=0 training.patience=10"))
    strategy.majority_level = None
    assert not strategy.patience_over(19, history(10, 19), 2, learned_above=0.95)
    assert strategy.patience_over(20, history(10, 20), 2, learned_above=0.95)
    assert strategy.patience_over(12, history(10, 12), 2, learned_above=0.85)  # learned
    assert strategy.patience_over(12, history(10, 12), 2)  # not a warm-up: its own patience


def test_a_model_one_test_row_above_the_majority_class_learned_nothing():
    assert 0.389 + majority_margin(0.389, 36) >= 0.417  # one row of 36 above the majority
    assert majority_margin(0.5, 10_000) == 0.005  # on many rows the floor
    assert 0.5 + majority_margin(0.5, 600) < 0.57  # MADELON's all-features model learned
