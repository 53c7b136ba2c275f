"""A stalled start: the uniform prediction detected, restarts at smaller rates, then one at
the configured rate."""

from __future__ import annotations

import numpy as np
import pytest

from vflfs.strategies.stall import stalled

from helpers import run_local, tiny_config


def test_stall_is_the_uniform_prediction_at_the_majority_rate():
    from types import SimpleNamespace

    from vflfs.ml.models import Task

    y = np.array([0, 1] * 50)
    experiment = SimpleNamespace(
        task=Task("classification", 2), y=y, splits=SimpleNamespace(train=np.arange(100))
    )
    flat = [{"train_loss": 0.6931, "val_metric": 0.5}] * 3
    assert stalled(experiment, flat)
    assert not stalled(experiment, [*flat[:2], {"train_loss": 0.5, "val_metric": 0.7}])
    # a slow start goes below the prior's entropy (0.6931) while it predicts the majority class
    slow = [{"train_loss": v, "val_metric": 0.5} for v in (0.6994, 0.6933, 0.6891)]
    assert not stalled(experiment, slow)
    assert stalled(experiment, [{"train_loss": v, "val_metric": 0.5} for v in (0.70, 0.694, 0.693)])


def test_a_restart_lowers_every_learning_rate_of_a_party():
    from vflfs.strategies.stall import MAX_RESTARTS, RESTART_LR, restarted

    spec = {"seed": 1, "optimizer": {"lr": 0.01}, "gates": {"input": {"lam": 1.0, "lr": 0.1}}}
    assert restarted(dict(spec), 0) == spec
    again = restarted(spec, 2)
    assert again["optimizer"]["lr"] == pytest.approx(0.01 * RESTART_LR**2) and again["seed"] != 1
    assert again["gates"]["input"] == {"lam": 1.0, "lr": pytest.approx(0.1 * RESTART_LR**2)}
    last = restarted(dict(spec, optimizer={"lr": 0.01}), MAX_RESTARTS + 1)
    assert last["optimizer"]["lr"] == 0.01 and last["seed"] not in (1, again["seed"])


@pytest.mark.parametrize(("epochs", "scales"), [(12, [0.3, 0.09, 1.0]), (9, [0.3, 0.09])])
def test_a_start_stalled_at_the_smallest_rate_restarts_at_the_configured_one(
    tmp_path, epochs, scales
):
    """At a rate too small to leave the uniform prediction every watched window stalls: two
    restarts at smaller rates, a last one at the configured rate, then no more watching. A
    window ending at the run's last epoch is not restarted."""
    cfg = tiny_config(f"strategy=vfl training.lr=1e-9 training.epochs={epochs}")
    summary = run_local(cfg, tmp_path)
    restarts = summary["extra"]["restarts"]
    assert [r["epoch"] for r in restarts] == [3, 6, 9][: len(scales)]
    assert [r["lr_scale"] for r in restarts] == pytest.approx(scales)
    assert summary["epochs_run"] == epochs
