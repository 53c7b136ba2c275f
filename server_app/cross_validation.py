"""K-fold cross-validation: the same parties, one strategy run per fold (spec section 1).

Folds re-split the sample indices (seeded, stratified for classification); each fold's
training rows are sent to the parties in a fresh setup, so scaling is refitted per fold.

A fold checkpoints as a run without folds does (:mod:`vflfs.strategies.checkpoint`), and each
completed fold's summary and history are written to ``folds_done.json``: a run stopped in fold
i resumes (``resume=true``) with the folds before it from that record and fold i from its last
checkpoint, and ends as the run never stopped.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf

from vflfs.datasets import kfold_splits
from vflfs.federation import Federation, Traffic
from vflfs.runtime import results as files
from vflfs.runtime.output_folder import OutputFolderError, differences
from vflfs.runtime.settings import TopLevelSettings
from vflfs.strategies import make_strategy
from vflfs.strategies.checkpoint import open_checkpoints, run_strategy

from .experiment import Experiment
from .outcome import learned_nothing

log = logging.getLogger("vflfs")

FOLDS = "folds.json"
# Per-fold numbers averaged into the top level of results.json.
AVERAGED = ("test_metric", "val_metric", "train_metric", "final_test_metric")
# A fold's own entries (its traffic, rows, path, importance and strategy extras): in ``folds``
# only, where the top level would show fold 0's.
FOLD_ONLY = ("step_losses", "path", "importance", "extra", "communication", "samples")
# What the top level keeps of each party: its columns, the same in every fold.
PARTY_KEYS = ("index", "columns", "n_features", "spurious", "device")


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
    """Run every fold (those a stopped run completed: from its record, :func:`folds_done`);
    write ``folds.json``, a ``history.csv`` with a fold column and the aggregated
    ``results.json``; return the latter."""
    from .run import summarize

    cfg, top = experiment.cfg, experiment.settings.top
    experiments = fold_experiments(experiment)
    files.write_atomic(out_dir / FOLDS, json.dumps(_fold_indices(experiments)))
    done = folds_done(out_dir, cfg, top)
    if done["folds"]:  # the resume's own messages (connection, alignment), reported apart
        bytes_ = federation.traffic.total_bytes()
        done["resumed"].append({"after_fold": len(done["folds"]) - 1, "bytes": bytes_})
        log.info("resuming after fold %d of %d", len(done["folds"]), len(experiments))
    summaries = [f["summary"] for f in done["folds"]]
    history = [row for f in done["folds"] for row in f["history"]]
    for i, fold in enumerate(experiments[len(summaries) :], start=len(summaries)):
        fold_start = start if i == 0 else time.perf_counter()  # fold 0 includes the setup
        if i > 0:
            federation.traffic = Traffic()
        labelled = _fold_label(on_epoch, i, len(experiments))
        strategy = make_strategy(cfg, experiment.settings)
        checkpoints = open_checkpoints(out_dir, cfg, strategy, federation, top, fold=i)
        result = run_strategy(strategy, federation, fold, checkpoints, labelled)
        wall = time.perf_counter() - fold_start
        summary = summarize(cfg, fold, federation, result, wall)
        summaries.append({k: v for k, v in summary.items() if k not in ("config", "status")})
        rows = [{"fold": i, **row} for row in result.history]
        history += rows
        done["folds"].append({"summary": summaries[-1], "history": [_as_written(r) for r in rows]})
        files.write_folds_done(out_dir, done)
        (out_dir / files.CHECKPOINT).unlink(missing_ok=True)  # of the fold just recorded
    aggregate = aggregate_folds(summaries)
    if done["resumed"]:
        aggregate["cv"]["resumed"] = done["resumed"]
    aggregate["wall_time_s"] = _total_wall(summaries, time.perf_counter() - start)
    aggregate["config"] = OmegaConf.to_container(cfg, resolve=True)
    files.write_history(out_dir, history)
    files.write_results(out_dir, aggregate)
    return aggregate


def folds_done(out_dir: Path, cfg: DictConfig, top: TopLevelSettings) -> dict:
    """The record of the folds a stopped run of ``cfg`` completed in ``out_dir``
    (``folds``: each one's summary and history rows; ``resumed``: the resumes so far), empty
    for a new run.

    As a checkpoint is, the record is never silently replaced: without ``resume=true`` or
    ``rerun=true`` the run is refused with a message naming both, and another configuration
    cannot continue it."""
    path = out_dir / files.FOLDS_DONE
    if not path.exists() or (top.rerun and not top.resume):
        path.unlink(missing_ok=True)
        return {"config": OmegaConf.to_container(cfg, resolve=True), "folds": [], "resumed": []}
    try:
        done = json.loads(path.read_text())
        n = len(done["folds"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise OutputFolderError(
            f"{path} cannot be read ({error}); fix: rerun=true to start afresh"
        ) from error
    changed = differences(done["config"], OmegaConf.to_container(cfg, resolve=True))
    if changed:
        raise OutputFolderError(
            f"{out_dir} holds an unfinished cross-validation of another configuration ({n} "
            f"folds done; {', '.join(changed[:5])} differ); fix: rerun=true to replace it, or "
            "choose another output folder"
        )
    if not top.resume:
        raise OutputFolderError(
            f"{out_dir} holds an unfinished cross-validation of this configuration, {n} folds "
            "done; fix: resume=true to continue it, or rerun=true to start afresh"
        )
    return done


def _as_written(row: dict) -> dict:
    """A history row whose values come back from JSON as ``history.csv`` writes them: numbers
    of Python's own types as they are, any other value (a numpy scalar) as its text."""
    native = (bool, int, float, str, type(None))
    return {k: v if isinstance(v, native) else str(v) for k, v in row.items()}


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


def aggregate_folds(summaries: list[dict]) -> dict:
    """The run's entries (strategy, dataset, task, the parties' columns, ...) with the folds'
    means at the top (scores, the selection, the majority-class baseline), every fold's
    warnings, best epoch and epochs run, and ``cv`` holding mean, std and values; each fold's
    own summary, the only place of its traffic, rows, path, importance and extras, is in
    ``folds``."""
    first = summaries[0]
    out = {"status": "completed", **{k: v for k, v in first.items() if k not in FOLD_ONLY}}
    out["parties"] = [{k: p[k] for k in PARTY_KEYS if k in p} for p in first["parties"]]
    cv: dict = {"folds": len(summaries)}
    for key in AVERAGED:
        if key in first:
            cv[key] = _stats([s[key] for s in summaries])
            out[key] = cv[key]["mean"]
    cv["selection_ratio"] = _stats([s["selection"]["ratio"] for s in summaries])
    cv["mb"] = _stats([s["communication"]["mb"] for s in summaries])
    for key in ("best_epoch", "epochs_run"):  # each fold's, in fold order
        out[key] = [s[key] for s in summaries]
    out["selection"] = _mean_selection([s["selection"] for s in summaries])
    out["baseline_test_metric"] = float(np.mean([s["baseline_test_metric"] for s in summaries]))
    out["warnings"] = _warnings(summaries, out)
    out["test_metric_std"] = cv["test_metric"]["std"]
    out["cv"] = cv
    out["folds"] = summaries
    return out


def _mean_selection(selections: list[dict]) -> dict:
    """The folds' selections averaged: features kept in all and per party, the ratio and,
    where known, precision, recall and the spurious columns removed (``per_fold``: each
    fold's count)."""
    out: dict = {
        "per_party": [
            {
                "party": parts[0]["party"],
                "selected": _mean(p["selected"] for p in parts),
                "of": parts[0]["of"],
            }
            for parts in zip(*(s["per_party"] for s in selections), strict=True)
        ],
        "selected_features": _mean(s["selected_features"] for s in selections),
        "total_features": selections[0]["total_features"],
        "per_fold": [s["selected_features"] for s in selections],
    }
    for key in ("ratio", "spurious_removed", "precision", "recall"):
        if all(key in s for s in selections):
            out[key] = _mean(s[key] for s in selections)
    return out


def _warnings(summaries: list[dict], aggregate: dict) -> list[str]:
    """Every fold's warnings, named by fold (each fold logged its own), after one for the
    folds together when their mean test score is no better than predicting without features
    (:func:`~.outcome.learned_nothing`); that one is logged here, with the count of folds
    that warned."""
    overall = learned_nothing(
        aggregate["task"],
        aggregate["test_metric"],
        aggregate["baseline_test_metric"],
        sum(s["samples"]["test"] for s in summaries),
        folds=len(summaries),
    )
    if overall:
        log.warning("WARNING: %s", overall)
    warned = sum(bool(s["warnings"]) for s in summaries)
    if warned:
        log.warning(
            "WARNING: %d of %d folds warned (results.json: warnings)", warned, len(summaries)
        )
    named = [f"fold {i}: {w}" for i, s in enumerate(summaries, start=1) for w in s["warnings"]]
    return ([overall] if overall else []) + named


def _mean(values) -> float:
    return float(np.mean(list(values)))


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
