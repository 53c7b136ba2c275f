"""``engine=simulation``: one job in Flower's simulation engine, through ``flwr run``.

The job runs as ``flwr run`` of the vflfs app against a simulation SuperLink of its own
(:class:`~vflfs.runtime.superlink.SimulationSuperLink`, started for the job and stopped after
it): the ServerApp in the SuperLink's ``flwr-simulation`` process, parties as ClientApps in Ray
actors. The resolved configuration travels as a file (the ``config-file`` run-config key), so
the ServerApp runs exactly ``cfg``; results come back through the output folder.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from .config import ConfigError
from .results import ERROR, PARTY_STATE, RESULTS, is_complete, read_results
from .settings import RunSettings
from .superlink import SimulationSuperLink

log = logging.getLogger("vflfs")

# The vflfs app: the package folder of a source checkout (``pip install -e``) holds the
# pyproject.toml that names the ServerApp and ClientApp.
APP_DIR = Path(__file__).resolve().parents[1]


class RunFailed(RuntimeError):
    """The ServerApp ended the run with an error (the message is the run's ``error.txt``)."""


def backend_config(cfg: DictConfig, settings: RunSettings | None = None) -> dict[str, object]:
    """Ray resources as ``--federation-config`` keys: by default one actor with every CPU, and
    the GPUs shared by the parties. ``settings``: ``cfg``'s run-wide sections as the run typed
    them (:func:`~vflfs.runtime.config.check_config`), else typed here."""
    settings = settings or RunSettings.from_cfg(cfg)
    sim, parties = settings.simulation, settings.split.num_parties
    cpus = os.cpu_count() or 1
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    client_gpus = sim.client_gpus
    if client_gpus is None:
        use_gpu = gpus > 0 and str(cfg.device) != "cpu"
        client_gpus = min(1.0, gpus / parties) if use_gpu else 0.0
    return {
        "num-supernodes": parties,
        "client-resources-num-cpus": sim.client_cpus or cpus,
        "client-resources-num-gpus": float(client_gpus),
        "init-args-num-cpus": int(cpus),
        "init-args-num-gpus": int(gpus),
        "init-args-logging-level": "error",
    }


def simulate(cfg: DictConfig, out_dir: str | Path) -> dict:
    """Train ``cfg`` in Flower's simulation engine; returns ``results.json``'s content.

    Bad input fails here, before any Flower process starts. Raises :class:`RunFailed` with the
    server's error if the run fails.
    """
    from vflfs.client_app.store import RUN_KEY
    from vflfs.server_app.run import prepare

    out_dir = Path(out_dir).absolute()
    experiment, _ = prepare(cfg, out_dir)
    if not (APP_DIR / "pyproject.toml").exists():
        raise ConfigError(
            "engine=simulation runs `flwr run` on the vflfs source folder, which this "
            "installation lacks; fix: engine=local, or install vflfs from a checkout "
            "(pip install -e .)"
        )
    with SimulationSuperLink() as superlink:
        config_file = superlink.workdir / "config.yaml"
        config_file.write_text(OmegaConf.to_yaml(cfg, resolve=True))
        status = superlink.run(
            APP_DIR,
            {
                "config-file": str(config_file),
                "output-dir": str(out_dir),
                RUN_KEY: str(out_dir / PARTY_STATE),  # the parties' saved states
            },
            backend_config(cfg, experiment.settings),
            on_line=_show,
        )
    if status["status"] == "finished:completed" and is_complete(out_dir):
        return read_results(out_dir)
    error = out_dir / ERROR
    detail = error.read_text().strip() if error.exists() else status.get("status-details", "")
    raise RunFailed(f"the simulation ended {status['status']}, without {RESULTS}: {detail}")


# A vflfs log line as the ServerApp streams it ("INFO    : epoch   3  loss ..."); Flower's and
# Ray's own lines (coloured level names, actor prefixes) do not match.
SERVER_LINE = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) *: (.*)$")


def _show(line: str) -> None:
    """Log the ServerApp's vflfs lines (epochs, the output folder) here; drop Flower's."""
    match = SERVER_LINE.match(line)
    if match:
        log.log(logging.getLevelName(match.group(1)), "%s", match.group(2))
