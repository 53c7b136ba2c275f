"""Run one configured job in Flower's simulation engine, in this process."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from omegaconf import DictConfig

from vflfs.federation import Observer

if TYPE_CHECKING:
    from flwr.clientapp import ClientApp

log = logging.getLogger("vflfs")


class _DropDeprecationBanner(logging.Filter):
    """Hides Flower's banner that ``run_simulation`` is deprecated (vflfs calls it on purpose:
    it runs the ServerApp in this process, which sweeps and tests rely on)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "run_simulation" not in str(record.msg)


def backend_config(cfg: DictConfig) -> dict:
    """Ray resources: by default one actor with every CPU, and the GPUs shared by the parties."""
    cpus = os.cpu_count() or 1
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    sim = cfg.get("simulation") or {}
    client_cpus = sim.get("client_cpus") or cpus
    client_gpus = sim.get("client_gpus")
    if client_gpus is None:
        use_gpu = gpus > 0 and str(cfg.device) != "cpu"
        client_gpus = min(1.0, gpus / int(cfg.split.num_parties)) if use_gpu else 0.0
    return {
        "client_resources": {"num_cpus": client_cpus, "num_gpus": float(client_gpus)},
        "init_args": {"num_cpus": cpus, "num_gpus": gpus, "logging_level": "ERROR"},
    }


def simulate(cfg: DictConfig, out_dir: str | Path, observers: list[Observer] | None = None) -> dict:
    """Train ``cfg`` in Flower's simulation engine; returns ``results.json``'s content.

    The ServerApp runs in this process (so ``observers`` see every message); parties run as
    ClientApps in Ray actors. Raises the server's error if the run fails.
    """
    from vflfs.client_app.app import app as client_app
    from vflfs.server_app.run import prepare, run_experiment

    prepare(cfg, out_dir)  # fail on bad input before Ray starts
    outcome: dict = {}
    server_app = ServerApp()

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        outcome["summary"] = run_experiment(grid, cfg, out_dir, observers)

    run_apps(server_app, client_app, cfg)
    if "summary" not in outcome:
        raise RuntimeError(f"the simulation ended without a result; see {out_dir}")
    return outcome["summary"]


def run_apps(server_app: ServerApp, client_app: ClientApp, cfg: DictConfig) -> None:
    """Run a ServerApp in this process and ``cfg.split.num_parties`` simulated SuperNodes of
    ``client_app`` in Ray actors (:func:`backend_config`), with Flower's log kept quiet."""
    from flwr.simulation import run_simulation

    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    flwr_log = logging.getLogger("flwr")
    flwr_log.setLevel(logging.WARNING)
    if not any(isinstance(f, _DropDeprecationBanner) for f in flwr_log.filters):
        flwr_log.addFilter(_DropDeprecationBanner())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        run_simulation(
            server_app=server_app,
            client_app=client_app,
            num_supernodes=int(cfg.split.num_parties),
            backend_config=backend_config(cfg),
        )
