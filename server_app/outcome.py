"""Whether a run learned anything: the checks behind ``results.json``'s ``warnings``."""

from __future__ import annotations

import logging

from vflfs.ml.metrics import majority_margin
from vflfs.strategies import RunResult
from vflfs.strategies.local_steps import reduced_warning

from .experiment import Experiment

log = logging.getLogger("vflfs")


def learned_nothing(
    kind: str, score: float, baseline: float, n: int, folds: int | None = None
) -> str | None:
    """The warning for a test score no better than predicting without features (None if it
    did better): for classification the majority class's accuracy ``baseline`` plus one
    standard error on the ``n`` test rows, for a regression an R^2 of zero. ``folds``: the
    score is the mean over that many folds (``n`` their test rows together)."""
    classification = kind == "classification"
    what = f"test {'accuracy' if classification else 'R^2'} {score:.4f}"
    if folds:
        what = f"mean {what} over {folds} folds"
    if not classification:
        if score > 0.0:
            return None
        return f"learned nothing: {what} is no better than predicting the mean"
    margin = majority_margin(baseline, n)
    if score > baseline + margin:
        return None
    return (
        f"learned nothing: {what} is no better than always predicting the majority class "
        f"({baseline:.4f}; one standard error on {n} test rows: {margin:.4f})"
    )


def outcome(experiment: Experiment, result: RunResult) -> dict:
    """``baseline`` (what predicting without features scores on the test rows) and the
    ``warnings`` of a run that learned nothing or whose selection cost accuracy; each
    warning is also logged."""
    kind, test = experiment.task.kind, experiment.splits.test
    baseline = experiment.majority_rate(test) if kind == "classification" else 0.0
    nothing = learned_nothing(kind, result.best["test_metric"], baseline, len(test))
    warnings: list[str] = [nothing] if nothing else []
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
