"""``vflfs-run``: the Hydra command line. ``-m`` sweeps run one simulation per job.

    vflfs-run dataset=phishing split=even split.num_parties=3 seed=1
    vflfs-run -m seed=0,1,2 training.local_steps=1,4
"""

from __future__ import annotations

import logging
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from .config import CONF_DIR
from .simulation import simulate

log = logging.getLogger("vflfs")


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def run(cfg: DictConfig) -> float:
    out_dir = Path(cfg.output_dir) if cfg.get("output_dir") else Path(
        HydraConfig.get().runtime.output_dir
    )
    summary = simulate(cfg, out_dir)
    log.info(
        "test %s %.4f (best epoch %d); %.2f MB; results in %s",
        summary["metric"], summary["test_metric"], summary["best_epoch"],
        summary["communication"]["mb"], out_dir,
    )
    return float(summary["test_metric"])


def main() -> None:
    logging.getLogger("flwr").propagate = False
    logging.getLogger("alembic").setLevel(logging.WARNING)
    run()


if __name__ == "__main__":
    main()
