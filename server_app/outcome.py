"""Whether a run learned anything: the checks behind ``results.json``'s ``warnings``."""

from __future__ import annotations

import logging

import numpy as np

from vflfs.strategies import RunResult
from vflfs.strategies.local_steps import reduced_warning

from .experiment import Experiment

log = logging.getLogger("vflfs")


def majority_rate(experiment: Experiment) -> float:
    """Test accuracy of always predicting the training rows' most frequent class."""
    y, splits = experiment.y, experiment.splits
    majority = np.bincount(y[splits.train], minlength=experiment.task.n_classes).argmax()
    return float(np.mean(y[splits.test] == majority)) if len(splits.test) else 0.0


def majority_margin(baseline: float, n_test: int) -> float:
    """How far above the majority class's test accuracy a model must score to show it learned
    something: one standard error of that accuracy on ``n_test`` rows (at least 0.005). On 36
    test rows one row is 2.8 points: a model one row above the majority class shows nothing."""
    return max(0.005, float(np.sqrt(baseline * (1 - baseline) / max(n_test, 1))))


def outcome(experiment: Experiment, result: RunResult) -> dict:
    """``baseline`` (what predicting without features scores on the test rows) and the
    ``warnings`` of a run that learned nothing or whose selection cost accuracy; each
    warning is also logged."""
    best = result.best
    warnings: list[str] = []
    if experiment.task.kind == "classification":
        baseline = majority_rate(experiment)
        n = len(experiment.splits.test)
        margin = majority_margin(baseline, n)
        if best["test_metric"] <= baseline + margin:
            warnings.append(
                f"learned nothing: test accuracy {best['test_metric']:.4f} is no better than "
                f"always predicting the majority class ({baseline:.4f}; one standard error "
                f"on {n} test rows: {margin:.4f})"
            )
    else:
        baseline = 0.0
        if best["test_metric"] <= 0.0:
            warnings.append(
                f"learned nothing: test R^2 {best['test_metric']:.4f} is no better than "
                "predicting the mean"
            )
    choice = result.extra.get("path_choice") or {}
    if choice.get("fallback") == "dense":
        warnings.append(
            "selection cost accuracy: every refit on a selection scored below the dense model "
            "by more than the tolerance, so the dense model (all features) is reported"
        )
    lowered = reduced_warning(result.extra.get("local_steps"))
    if lowered is not None:
        warnings.append(lowered)
    for w in warnings:
        log.warning("WARNING: %s", w)
    return {"baseline_test_metric": baseline, "warnings": warnings}
