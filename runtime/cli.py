"""``vflfs-run``: the Hydra command line. ``-m`` sweeps run one simulation per job.

vflfs-run dataset=phishing split=even split.num_parties=3 seed=1
vflfs-run -m seed=0,1,2 training.local_steps=1,4
vflfs-run -m +experiment=fedsdg_table3 engine=local   # every job in this process, no Ray
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from .config import CONF_DIR
from .results import RESULTS, is_complete
from .simulation import simulate

log = logging.getLogger("vflfs")


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def run(cfg: DictConfig) -> float:
    out_dir = job_output_dir(cfg)
    if is_complete(out_dir) and not cfg.get("rerun", False):
        summary = json.loads((out_dir / RESULTS).read_text())
        log.info("skip: %s already holds a completed run (rerun=true to run again)", out_dir)
        return float(summary["test_metric"])
    summary = run_job(cfg, out_dir)
    log.info(
        "test %s %.4f (best epoch %d); %.2f MB; results in %s",
        summary["metric"],
        summary["test_metric"],
        summary["best_epoch"],
        summary["communication"]["mb"],
        out_dir,
    )
    return float(summary["test_metric"])


def run_job(cfg: DictConfig, out_dir: Path) -> dict:
    """One job in the configured ``engine``; returns ``results.json``'s content.

    ``simulation``: Flower's simulation engine (parties in Ray actors). ``local``: the same
    ServerApp logic and the real ClientApp with its message encoding, over an in-process
    :class:`~vflfs.federation.LocalGrid` (no Ray start-up; for long sweeps of small jobs).
    """
    if str(cfg.get("engine", "simulation")) != "local":
        return simulate(cfg, out_dir)  # checks the config (engine included) before Ray starts
    from vflfs.client_app.app import app as client_app
    from vflfs.federation import LocalGrid
    from vflfs.server_app.run import run_experiment

    return run_experiment(LocalGrid(client_app, int(cfg.split.num_parties)), cfg, out_dir)


def job_output_dir(cfg: DictConfig) -> Path:
    """``output_dir`` if set (one sub-folder per job under ``-m``), else Hydra's job folder."""
    hydra_cfg = HydraConfig.get()
    if not cfg.get("output_dir"):
        return Path(hydra_cfg.runtime.output_dir)
    out_dir = Path(str(cfg.output_dir)).expanduser().absolute()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        # Every job of a sweep would otherwise overwrite the same results.json.
        out_dir = out_dir / (hydra_cfg.job.override_dirname or str(hydra_cfg.job.num))
    return out_dir


def main() -> None:
    logging.getLogger("flwr").propagate = False
    logging.getLogger("alembic").setLevel(logging.WARNING)
    run()


if __name__ == "__main__":
    main()
