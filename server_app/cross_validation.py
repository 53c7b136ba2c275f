"""K-fold cross-validation: the same parties, one strategy run per fold (spec section 1).

Folds re-split the sample indices (seeded, stratified for classification); each fold's
training rows are sent to the parties in a fresh setup, so scaling is refitted per fold.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from vflfs.datasets import kfold_splits
from vflfs.federation import Federation, Traffic
from vflfs.runtime import results as files
from vflfs.strategies import make_strategy

from .experiment import Experiment

FOLDS = "folds.json"
# Per-fold numbers averaged into the top level of results.json.
AVERAGED = ("test_metric", "val_metric", "train_metric", "final_test_metric")


def fold_experiments(experiment: Experiment) -> list[Experiment]:
    """One experiment per fold: same data and parties, the fold's sample splits."""
    cv, samples = experiment.cv, experiment.samples
    folds = kfold_splits(
        len(experiment.y),
        experiment.y if experiment.task.kind == "classification" else None,
        cv.folds,
        experiment.seed if cv.seed is None else cv.seed,
        val_fraction=samples.val_fraction,
        stratify=samples.stratify,
    )
    return [dataclasses.replace(experiment, splits=splits) for splits in folds]


def cross_validate(
    federation: Federation,
    experiment: Experiment,
    out_dir: Path,
    start: float,
    on_epoch: Callable[[dict], None] | None = None,
) -> dict:
    """Run every fold; write ``folds.json``, a ``history.csv`` with a fold column and the
    aggregated ``results.json``; return the latter."""
    from .run import summarize

    experiments = fold_experiments(experiment)
    files.write_atomic(out_dir / FOLDS, json.dumps(_fold_indices(experiments)))
    summaries, history = [], []
    for i, fold in enumerate(experiments):
        fold_start = start if i == 0 else time.perf_counter()  # fold 0 includes the setup
        if i > 0:
            federation.traffic = Traffic()
        labelled = _fold_label(on_epoch, i, len(experiments))
        result = make_strategy(experiment.cfg, experiment.settings).start(
            federation, fold, on_epoch=labelled
        )
        wall = time.perf_counter() - fold_start
        summary = summarize(experiment.cfg, fold, federation, result, wall)
        summaries.append({k: v for k, v in summary.items() if k not in ("config", "status")})
        history += [{"fold": i, **row} for row in result.history]
    aggregate = _aggregate(summaries)
    aggregate["wall_time_s"] = _total_wall(summaries, time.perf_counter() - start)
    aggregate["config"] = summary["config"]
    files.write_history(out_dir, history)
    files.write_results(out_dir, aggregate)
    return aggregate


def _fold_label(
    on_epoch: Callable[[dict], None] | None, fold: int, folds: int
) -> Callable[[dict], None] | None:
    """``on_epoch`` seeing each row with ``fold`` (1-based) and ``folds`` added."""
    if on_epoch is None:
        return None
    return lambda row: on_epoch({**row, "fold": fold + 1, "folds": folds})


def _fold_indices(experiments: list[Experiment]) -> list[dict]:
    return [
        {k: getattr(e.splits, k).tolist() for k in ("train", "val", "test")} for e in experiments
    ]


def _aggregate(summaries: list[dict]) -> dict:
    """Fold 0's layout with fold means at the top and ``cv`` holding mean, std and values."""
    first = summaries[0]
    out = {"status": "completed", **{k: v for k, v in first.items() if k != "step_losses"}}
    cv: dict = {"folds": len(summaries)}
    for key in AVERAGED:
        if key in first:
            cv[key] = _stats([s[key] for s in summaries])
            out[key] = cv[key]["mean"]
    cv["selection_ratio"] = _stats([s["selection"]["ratio"] for s in summaries])
    cv["mb"] = _stats([s["communication"]["mb"] for s in summaries])
    out["selection"] = {**first["selection"], "ratio": cv["selection_ratio"]["mean"]}
    out["test_metric_std"] = cv["test_metric"]["std"]
    out["cv"] = cv
    out["folds"] = summaries
    return out


def _total_wall(summaries: list[dict], total: float) -> dict:
    """The whole run's wall time, and each phase's summed over the folds."""
    phases: dict[str, float] = {}
    for s in summaries:
        for phase, seconds in s["wall_time_s"].items():
            if phase != "total":
                phases[phase] = phases.get(phase, 0.0) + seconds
    return {"total": total, **phases}


def _stats(values: list[float]) -> dict:
    arr = np.asarray(values, dtype=float)
    return {"mean": float(arr.mean()), "std": float(arr.std(ddof=1)), "values": arr.tolist()}
