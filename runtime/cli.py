"""``vflfs-run``: the Hydra command line. ``-m`` sweeps run one job after another.

vflfs-run dataset=phishing split=even split.num_parties=3 seed=1
vflfs-run -m seed=0,1,2 training.local_steps=1,4
vflfs-run engine=simulation        # the job in Flower's simulation engine (flwr run, Ray)

A wrong setting or unusable data ends the command with a one-line message and exit status 1;
``VFLFS_DEBUG=1`` shows the traceback as well.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from vflfs.federation import PartyError

from .config import CONF_DIR, ConfigError, check_overrides, register_schemas
from .output_folder import holds_same_run
from .results import PARTY_STATE, RESULTS
from .settings import TopLevelSettings
from .simulation import RunFailed, simulate

log = logging.getLogger("vflfs")

# Errors that come from what the user asked for (settings, data, a party's input), reported in
# one line; anything else is a defect and keeps its traceback.
USER_ERRORS = (ValueError, FileNotFoundError, PartyError, RunFailed)


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def run(cfg: DictConfig) -> float:
    try:
        return run_or_skip(cfg)
    except USER_ERRORS as error:
        if os.environ.get("VFLFS_DEBUG", "") not in ("", "0"):
            raise
        log.error("error: %s (VFLFS_DEBUG=1 shows the traceback)", one_line(error))
        raise SystemExit(1) from None


def run_or_skip(cfg: DictConfig) -> float:
    """Run the job, or skip it when its folder already holds this configuration's results."""
    out_dir = job_output_dir(cfg)
    if not TopLevelSettings.from_cfg(cfg).rerun and holds_same_run(out_dir, cfg):
        summary = json.loads((out_dir / RESULTS).read_text())
        log.info("skip: %s already holds a completed run (rerun=true to run again)", out_dir)
        return float(summary["test_metric"])
    summary = run_job(cfg, out_dir)
    log.info("%s; results in %s", outcome(summary), out_dir)
    return float(summary["test_metric"])


def run_job(cfg: DictConfig, out_dir: Path) -> dict:
    """One job in the configured ``engine``; returns ``results.json``'s content.

    ``local`` (the default): the ServerApp logic and the real ClientApp with its message
    encoding, over an in-process :class:`~vflfs.federation.LocalGrid`. ``simulation``: the job
    under ``flwr run`` on a SuperLink of its own, parties as ClientApps in Ray actors.
    """
    if TopLevelSettings.from_cfg(cfg).engine != "local":
        return simulate(cfg, out_dir)  # checks the config (engine included) before starting
    from vflfs.client_app.app import app as client_app
    from vflfs.client_app.store import RUN_KEY
    from vflfs.federation import LocalGrid
    from vflfs.server_app.run import check_run, run_experiment

    settings = check_run(cfg, out_dir)  # a bad value is refused by name before the grid is made
    # The parties save their state at epoch boundaries in the output folder, for resume=true.
    parties = {RUN_KEY: str(out_dir / PARTY_STATE)}
    grid = LocalGrid(client_app, settings.split.num_parties, run_config=parties)
    return run_experiment(grid, cfg, out_dir, settings=settings)


def outcome(summary: dict) -> str:
    """The closing line: test score at the best epoch (mean ± std over folds), the features
    kept (with precision and recall where the relevant columns are known) and traffic."""
    cv, selection = summary.get("cv"), summary["selection"]
    n = float(selection["selected_features"])  # a mean over folds need not be whole
    kept = f"{n:.0f}" if n.is_integer() else f"{n:.1f}"
    kept += f" of {selection['total_features']} features"
    if "precision" in selection:  # the relevant columns are known
        kept += f" (precision {selection['precision']:.2f}, recall {selection['recall']:.2f})"
    if not cv:
        return (
            f"test {summary['metric']} {summary['test_metric']:.4f} (best epoch "
            f"{summary['best_epoch']}); {kept}; {summary['communication']['mb']:.2f} MB"
        )
    test = cv["test_metric"]
    epochs = ", ".join(str(f["best_epoch"]) for f in summary["folds"])
    return (
        f"test {summary['metric']} {test['mean']:.4f} ± {test['std']:.4f} over {cv['folds']} "
        f"folds (best epochs {epochs}); {kept} on average; {cv['mb']['mean']:.2f} MB per fold"
    )


def one_line(error: BaseException) -> str:
    return re.sub(r"\s*\n\s*", " ", str(error)).strip() or type(error).__name__


def job_output_dir(cfg: DictConfig) -> Path:
    """``output_dir`` if set (one sub-folder per job under ``-m``), else Hydra's job folder."""
    hydra_cfg = HydraConfig.get()
    if not cfg.get("output_dir"):
        return Path(hydra_cfg.runtime.output_dir).absolute()
    out_dir = Path(str(cfg.output_dir)).expanduser().absolute()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        # Every job of a sweep would otherwise overwrite the same results.json.
        out_dir = out_dir / (hydra_cfg.job.override_dirname or str(hydra_cfg.job.num))
    return out_dir


def main() -> None:
    logging.getLogger("flwr").propagate = False
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        check_overrides(sys.argv[1:])
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    register_schemas()
    run()


if __name__ == "__main__":
    main()
