"""One run on any Flower Grid: checks, the strategy's loop, and the output files."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch
from flwr.serverapp import Grid
from omegaconf import DictConfig, OmegaConf

from vflfs.datasets.alignment import METHOD
from vflfs.federation import Federation, Observer, PartyError
from vflfs.runtime import results as files
from vflfs.runtime.config import check_config
from vflfs.runtime.settings import RunSettings
from vflfs.strategies import RunResult, Strategy, make_strategy
from vflfs.strategies.checkpoint import completed, open_checkpoints, run_strategy

from .alignment import align_samples
from .cross_validation import cross_validate
from .experiment import Experiment
from .identity import verify_parties
from .outcome import outcome

log = logging.getLogger("vflfs")


def check_run(cfg: DictConfig, out_dir: str | Path) -> RunSettings:
    """The run-wide sections, typed once for the whole run (:func:`check_config`).

    First removes the outcome files an earlier run left in ``out_dir``. A failure writes
    ``error.txt`` into ``out_dir`` and raises, before any data is loaded.
    """
    files.clear_outcome(Path(out_dir))
    try:
        return check_config(cfg)
    except BaseException as error:
        files.write_error(Path(out_dir), error)
        raise


def prepare(
    cfg: DictConfig, out_dir: str | Path, settings: RunSettings | None = None
) -> tuple[Experiment, Strategy]:
    """Every check that needs no party: config, data, splits, strategy name.

    ``settings``: as :func:`check_run` returned them for ``cfg`` and ``out_dir``, else
    checked here. A failure writes ``error.txt`` into ``out_dir`` and raises, before any
    message is sent.
    """
    settings = settings or check_run(cfg, out_dir)
    try:
        if cfg.get("threads"):
            torch.set_num_threads(int(cfg.threads))
        return Experiment.from_config(cfg, settings), make_strategy(cfg, settings)
    except BaseException as error:
        files.write_error(Path(out_dir), error)
        raise


def run_experiment(
    grid: Grid,
    cfg: DictConfig,
    out_dir: str | Path,
    observers: list[Observer] | None = None,
    settings: RunSettings | None = None,
) -> dict:
    """Check the config, train with its strategy over ``grid``, write the output folder.

    With ``cv.folds = k > 1`` the strategy runs once per fold over the same parties, and
    ``results.json`` holds the mean and standard deviation over folds (spec section 1).
    The run checkpoints at epoch boundaries (``checkpoint_every_s``) and, with
    ``resume=true``, continues from the checkpoint it finds in ``out_dir``
    (:mod:`vflfs.strategies.checkpoint`). ``settings``: ``cfg``'s run-wide sections as
    :func:`check_run` returned them, else checked here.
    """
    out_dir = Path(out_dir)
    start = time.perf_counter()
    experiment, strategy = prepare(cfg, out_dir, settings)
    try:
        federation = make_federation(grid, experiment, observers)
        top = experiment.settings.top
        # a cross-validation opens each fold's checkpoints (server_app/cross_validation.py)
        cv = experiment.cv.enabled
        checkpoints = None if cv else open_checkpoints(out_dir, cfg, strategy, federation, top)
        files.write_config(out_dir, cfg)
        log.info(
            "vflfs: %s on %s, %d parties -> %s",
            strategy.name,
            cfg.dataset.name,
            experiment.num_parties,
            out_dir,
        )
        with federation.traffic.in_phase("setup"):
            federation.connect()
            keys = experiment.settings.federation.party_keys
            verify_parties(federation, cfg, keys, deployment=is_deployment(grid))
        if experiment.needs_alignment:
            with federation.traffic.in_phase("align"):
                experiment = align_samples(federation, experiment)
        if experiment.cv.enabled:
            summary = cross_validate(federation, experiment, out_dir, start, on_epoch=_log_epoch)
        else:
            result = run_strategy(strategy, federation, experiment, checkpoints, _log_epoch)
            summary = summarize(cfg, experiment, federation, result, time.perf_counter() - start)
            files.write_history(out_dir, result.history)
            files.write_results(out_dir, summary)
        completed(out_dir)  # its checkpoint and the parties' saved states are of no more use
        return summary
    except BaseException as error:
        files.write_error(out_dir, error, resume_note(out_dir, error))
        raise


def resume_note(out_dir: Path, error: BaseException) -> str:
    """How to continue a run that a party's failure or outage ended after a checkpoint."""
    note = files.resume_hint(out_dir) if isinstance(error, PartyError) else ""
    if note:
        log.error(note)
    return note


def make_federation(
    grid: Grid, experiment: Experiment, observers: list[Observer] | None = None
) -> Federation:
    """The run's parties over ``grid``, with the ``federation.*`` timeouts and poll interval."""
    f = experiment.settings.federation
    return Federation(
        grid,
        experiment.num_parties,
        timeout=f.timeout,
        connect_timeout=f.connect_timeout,
        poll_interval=poll_interval(grid, experiment.settings),
        observers=observers,
        outage_timeout=f.outage_timeout,
    )


def poll_interval(grid: Grid, settings: RunSettings) -> float:
    """``federation.poll_interval``; in the deployment engine at least
    ``deployment.poll_interval`` (each poll is an HTTP request to the SuperLink there)."""
    interval = settings.federation.poll_interval
    if is_deployment(grid):
        interval = max(interval, settings.deployment.poll_interval)
    return interval


def is_deployment(grid: Grid) -> bool:
    """Whether ``grid`` is Flower's deployment engine's (flwr.superlink.grid.http_grid)."""
    return type(grid).__name__ == "HttpGrid"


def _log_epoch(row: dict) -> None:
    """One line per epoch; cross-validation rows carry ``fold`` (1-based) and ``folds``."""
    fold = f"fold {row['fold']}/{row['folds']} " if "fold" in row else ""
    log.info(
        "%sepoch %3d  loss %.4f  val %.4f  test %.4f  %.2f MB  %.1f s",
        fold,
        row["epoch"],
        row["train_loss"],
        row["val_metric"],
        row["test_metric"],
        row["mb"],
        row["wall_s"],
    )


def _alignment(experiment: Experiment) -> dict:
    """Sample counts of a party-files run's alignment (counts only, no IDs)."""
    if experiment.labels is None or experiment.party_rows is None:
        return {}
    return {
        "alignment": {
            "labels_rows": int(len(experiment.labels.ids)),
            "aligned": int(len(experiment.y)),
            "method": METHOD,
        }
    }


def summarize(
    cfg: DictConfig,
    experiment: Experiment,
    federation: Federation,
    result: RunResult,
    wall: float,
) -> dict:
    """The JSON-ready ``results.json`` of a completed run."""
    best = result.best
    traffic = federation.traffic.summary()
    return {
        "status": "completed",
        "strategy": result.strategy,
        "dataset": str(cfg.dataset.name),
        "seed": experiment.seed,
        "task": experiment.task.kind,
        "metric": result.metric,
        "test_metric": best["test_metric"],
        "val_metric": best["val_metric"],
        **({"train_metric": best["train_metric"]} if "train_metric" in best else {}),
        "best_epoch": best["epoch"],
        "epochs_run": len(result.history),
        "final_test_metric": result.history[-1]["test_metric"],
        "prediction_bytes_per_sample": best["prediction_bytes_per_sample"],
        "selection": result.selection(experiment.relevant),
        **outcome(experiment, result),
        **({"path": result.extra["path"]} if "path" in result.extra else {}),
        "communication": traffic,
        "wall_time_s": {"total": wall, **{p: v["wall_s"] for p, v in traffic["phases"].items()}},
        "devices": {
            "server": result.extra.get("server_device"),
            "parties": [p.device for p in result.parties],
        },
        "samples": {k: int(len(getattr(experiment.splits, k))) for k in ("train", "val", "test")},
        **_alignment(experiment),
        "parties": [p.as_dict() for p in result.parties],
        "importance": result.importance,
        "extra": {k: v for k, v in result.extra.items() if k not in ("server_device", "path")},
        "step_losses": result.step_losses,
        "config": OmegaConf.to_container(cfg, resolve=True),
    }
