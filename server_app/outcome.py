"""Whether a run learned anything: the checks behind ``results.json``'s ``warnings``."""

from __future__ import annotations

import logging

from vflfs.ml.metrics import majority_margin
from vflfs.strategies import RunResult
from vflfs.strategies.local_steps import reduced_warning

from .experiment import Experiment

log = logging.getLogger("vflfs")


def outcome(experiment: Experiment, result: RunResult) -> dict:
    """``baseline`` (what predicting without features scores on the test rows) and the
    ``warnings`` of a run that learned nothing or whose selection cost accuracy; each
    warning is also logged."""
    best = result.best
    warnings: list[str] = []
    if experiment.task.kind == "classification":
        baseline = experiment.majority_rate(experiment.splits.test)
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
    if choice.get("fallback") == "every_feature":
        warnings.append(
            f"selection removed nothing: the model that scored best on validation, path point "
            f"{choice.get('point')}'s own (penalised) model, keeps every feature"
        )
    if (result.extra.get("count_choice") or {}).get("fallback") == "dense":
        warnings.append(
            "selection removed nothing: no smaller count of features scored within the "
            "tolerance of the model on every feature, so that model is reported"
        )
    lowered = reduced_warning(result.extra.get("local_steps"))
    if lowered is not None:
        warnings.append(lowered)
    for w in warnings:
        log.warning("WARNING: %s", w)
    return {"baseline_test_metric": baseline, "warnings": warnings}
