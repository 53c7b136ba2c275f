"""The vflfs ServerApp (``flwr run .``): compose the Hydra config from the run config, train.

Run config keys (``--run-config``): ``hydra-overrides`` (e.g. ``"dataset=madelon seed=1"``) and
``output-dir``.
"""

from __future__ import annotations

from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from vflfs.runtime.config import compose_config
from vflfs.runtime.results import default_output_dir

from .run import run_experiment

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = compose_config(str(context.run_config.get("hydra-overrides", "")))
    out = str(context.run_config.get("output-dir", "") or cfg.get("output_dir") or "")
    run_experiment(grid, cfg, Path(out) if out else default_output_dir())
