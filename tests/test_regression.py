"""Regression targets: the server standardises them on its training rows, so the scale of y
changes nothing but the numbers it is written in."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import make_friedman1

from vflfs.ml.metrics import score
from vflfs.ml.models import Task
from vflfs.runtime.config import compose_config

from helpers import run_local


def test_task_standardises_on_the_training_targets_and_r2_is_unchanged():
    y = np.array([100.0, 200.0, 300.0, 400.0])
    task = Task("regression").fitted(y[:2])
    assert (task.center, task.scale) == (150.0, 50.0)
    np.testing.assert_allclose(task.target(y).numpy(), [-1, 1, 3, 5])
    out = task.target(y + np.array([10.0, -10.0, 5.0, 0.0])).unsqueeze(-1)
    assert np.isclose(score(task, out, y), 1 - 225 / 50_000)  # R^2 on the original scale
    assert Task("classification", 2).fitted(y) == Task("classification", 2)


def test_a_run_is_the_same_whatever_the_scale_of_the_targets(tmp_path):
    X, y = make_friedman1(n_samples=400, n_features=12, random_state=0)
    summaries = []
    for k, (a, b) in enumerate([(1.0, 0.0), (1000.0, -5000.0)]):
        path = tmp_path / f"d{k}.npz"
        np.savez(path, X=X, y=a * y + b)
        cfg = compose_config(
            f"dataset=npz dataset.params.path={path} dataset.params.task=regression "
            "training.epochs=4 training.batch_size=64 training.patience=null"
        )
        summaries.append(run_local(cfg, tmp_path / f"out{k}"))
    plain, scaled = summaries
    assert plain["metric"] == "r2" and plain["test_metric"] > 0.2
    np.testing.assert_allclose(plain["step_losses"], scaled["step_losses"], rtol=1e-4)
    assert np.isclose(plain["test_metric"], scaled["test_metric"], atol=1e-4)
