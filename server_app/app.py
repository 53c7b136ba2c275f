"""The vflfs ServerApp (``flwr run .``): compose the Hydra config from the run config, train.

Run config keys (``--run-config``): ``hydra-overrides`` (e.g. ``"dataset=madelon seed=1"``) and
``output-dir``.

Under ``flwr run`` the ServerApp runs in a process that the SuperLink starts, in the SuperLink's
working directory, not in the directory where ``flwr run`` was typed (for the ``:local:``
SuperLink, that is wherever the first ``flwr`` command started it). So ``output-dir`` (or the
``output_dir`` Hydra key) must be an absolute path; a relative one fails the run with a message
saying so. When neither is set, results go to ``<SuperLink cwd>/outputs/<time>``; the folder
is logged (``run_experiment``'s first line, streamed by ``flwr run --stream``). For the same
reason a labels file (``dataset=party_files dataset.labels_path=...``) must be absolute.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from vflfs.runtime.config import ConfigError, compose_config
from vflfs.runtime.results import default_output_dir, write_error

from .run import run_experiment

log = logging.getLogger("vflfs")

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    _log_to_stream()
    cfg = compose_config(str(context.run_config.get("hydra-overrides", "")))
    out_dir = resolve_output_dir(
        str(context.run_config.get("output-dir", "") or ""), cfg.get("output_dir")
    )
    try:
        check_server_paths(cfg)
    except ConfigError as error:
        write_error(out_dir, error)
        raise
    run_experiment(grid, cfg, out_dir)


def check_server_paths(cfg) -> None:
    """Files the ServerApp reads must be named by absolute paths under ``flwr run``."""
    for key in ("labels_path",):
        value = cfg.dataset.get(key)
        if value is not None and not Path(str(value)).expanduser().is_absolute():
            raise ConfigError(
                f"dataset.{key} must be an absolute path under `flwr run`, got {value!r}: the "
                f"ServerApp runs in the SuperLink's working directory ({Path.cwd()}); fix: give "
                f"an absolute path (e.g. $PWD/{value})"
            )


def resolve_output_dir(run_config_value: str, hydra_value: str | None) -> Path:
    """The run's output folder: ``output-dir``, else Hydra's ``output_dir``, else a default."""
    for key, value in (("output-dir", run_config_value), ("output_dir", hydra_value)):
        if not value:
            continue
        path = Path(str(value)).expanduser()
        if not path.is_absolute():
            raise ConfigError(
                f"{key} must be an absolute path under `flwr run`, got {value!r}: the ServerApp "
                f"runs in the SuperLink's working directory ({Path.cwd()}), not where `flwr run` "
                f"was called; fix: give an absolute path (e.g. $PWD/{value})"
            )
        return path
    return default_output_dir()


def _log_to_stream() -> None:
    """Show vflfs's INFO lines (epochs, output folder) in ``flwr run --stream`` and log files."""
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)-8s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
