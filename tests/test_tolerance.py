"""The validation choices' tolerance: a score one validation row below the best is within a
tolerance of one row, whatever the rounding of the fractions."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from test_path_choice import point

from vflfs.strategies.count_ladder import fallen_short
from vflfs.strategies.path_choice import choose, good_scores, is_within, tolerance


def experiment(val_rows: int) -> SimpleNamespace:
    """What :func:`tolerance` reads of an experiment: the task and the validation rows."""
    return SimpleNamespace(
        task=SimpleNamespace(kind="classification"),
        splits=SimpleNamespace(val=np.arange(val_rows)),
    )


def test_one_row_below_the_best_is_within_one_row():
    # 95/96 - 1/96 rounds above 94/96: the comparison must not turn on that rounding.
    assert 95 / 96 - 1 / 96 > 94 / 96
    for n in range(2, 400):
        for k in range(1, n + 1):
            assert is_within((k - 1) / n, k / n, 1 / n), (k, n)
            assert not is_within((k - 2) / n, k / n, 1 / n) or k < 2


def test_the_floor_of_one_row_keeps_a_model_one_row_below_a_near_perfect_score():
    # 96 validation rows, the best 95 right: one standard error is at its floor of one row,
    # and the model one row behind is good (before, the choice kept only the best).
    slack = tolerance(None, experiment(96), 95 / 96, 1.0)
    assert slack == 1 / 96
    assert good_scores([95 / 96, 94 / 96, 93 / 96], slack) == [0, 1]
    points = [point(0, 95 / 96, [3, 3]), point(1, 94 / 96, [1, 1])]
    assert choose(points, slack, None).point == 1


def test_half_a_standard_error_at_its_floor_of_one_row_is_the_row():
    # 192 validation rows, the best 191 right: the standard error is at its floor of one row,
    # half of it would leave only ties, and the slack is the row; two standard errors stay two
    # rows, and zero (the best score only) stays zero.
    assert tolerance(None, experiment(192), 191 / 192, 0.5) == 1 / 192
    assert good_scores([191 / 192, 190 / 192, 189 / 192], 1 / 192) == [0, 1]
    assert tolerance(None, experiment(192), 191 / 192, 2.0) == 2 / 192
    assert tolerance(None, experiment(192), 191 / 192, 0.0) == 0.0
    # Away from the floor half a standard error stands, below a row on 32 rows at 28 right.
    half = 0.5 * np.sqrt(28 / 32 * 4 / 32 / 32)
    assert tolerance(None, experiment(32), 28 / 32, 0.5) == pytest.approx(half)
    assert half < 1 / 32
    assert tolerance(None, experiment(192), 0.9, 1.0) == pytest.approx(np.sqrt(0.09 / 192))


def test_counts_fall_short_only_beyond_the_margin():
    # Three standard errors (three rows at the floor) below the best: not yet far.
    best = SimpleNamespace(val_metric=95 / 96)
    near = [SimpleNamespace(val_metric=92 / 96) for _ in range(2)]
    assert not fallen_short([best, best, *near], experiment(96), None, 1.0)
    far = [SimpleNamespace(val_metric=91 / 96) for _ in range(2)]
    assert fallen_short([best, best, *far], experiment(96), None, 1.0)
