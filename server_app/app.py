"""The vflfs ServerApp (``flwr run .``): compose the Hydra config from the run config, train.

Run config keys (``--run-config``): ``hydra-overrides`` (e.g. ``"dataset=madelon seed=1"``),
``output-dir``, and ``config-file`` (a resolved configuration to run instead of composing one).

A configuration error leaves ``error.txt`` in ``output-dir`` when that names an absolute folder.
So does a ServerApp that ends before the run finished (Flower ends it, ``flwr stop``, or its
SuperLink refuses connections for ``deployment.superlink_timeout`` seconds): :mod:`.interrupted`.
A folder holding a completed run of another configuration is refused (``rerun=true`` in the
overrides replaces it); one holding the same configuration's is run again.

Under ``flwr run`` the ServerApp runs in a process that the SuperLink starts, in the SuperLink's
working directory, not in the directory where ``flwr run`` was typed (for the ``:local:``
SuperLink, that is wherever the first ``flwr`` command started it). So ``output-dir`` (or the
``output_dir`` Hydra key) must be an absolute path; a relative one fails the run with a message
saying so. When neither is set, results go to ``<SuperLink cwd>/outputs/<time>``; the folder
is logged (``run_experiment``'s first line, streamed by ``flwr run --stream``). For the same
reason a labels file (``dataset=party_files dataset.labels_path=...``) and the data folder
(``dataset.data_dir``) must be absolute. The ServerApp's environment is the SuperLink's, fixed
when the SuperLink started, so pass the data folder as ``dataset.data_dir`` in
``hydra-overrides`` rather than through ``VFLFS_DATA_DIR``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from omegaconf import DictConfig, OmegaConf

from vflfs.datasets.paths import resolve_data_dir
from vflfs.runtime.config import ConfigError, compose_config
from vflfs.runtime.output_folder import OutputFolderError, holds_same_run
from vflfs.runtime.results import default_output_dir, write_error
from vflfs.runtime.settings import TopLevelSettings

from .interrupted import RunInterrupted, watch_exit, watch_superlink
from .run import check_run, run_experiment

log = logging.getLogger("vflfs")

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    _log_to_stream()
    named = str(context.run_config.get("output-dir", "") or "")
    out_dir: Path | None = _absolute(named)
    try:
        cfg = load_config(context.run_config)
        out_dir = resolve_output_dir(named, cfg.get("output_dir"))
        check_server_paths(cfg)
        if not TopLevelSettings.from_cfg(cfg).rerun:
            holds_same_run(out_dir, cfg)  # refuses a completed run of another configuration
    except Exception as error:
        if out_dir is not None and not isinstance(error, OutputFolderError):
            write_error(out_dir, error)
        raise
    settings = check_run(cfg, out_dir)  # typed once: the watch and the run share them
    watched = watch_exit(out_dir)
    watch_superlink(grid, settings.deployment, watched)
    try:
        run_experiment(grid, cfg, out_dir, settings=settings)
    except (SystemExit, KeyboardInterrupt):
        if watched.ended:  # run_experiment recorded the exit itself; keep the reason instead
            write_error(out_dir, RunInterrupted(watched.reason))
        raise


def load_config(run_config) -> DictConfig:
    """``config-file`` (a resolved configuration, as ``vflfs-run engine=simulation`` passes
    it), else the composition of ``hydra-overrides``."""
    path = str(run_config.get("config-file", "") or "")
    if path:
        return OmegaConf.load(path)  # type: ignore[return-value]
    return compose_config(str(run_config.get("hydra-overrides", "")))


def _absolute(value: str) -> Path | None:
    path = Path(value).expanduser()
    return path if value and path.is_absolute() else None


def check_server_paths(cfg) -> None:
    """Files the ServerApp reads must be named by absolute paths under ``flwr run`` (a file
    path may be relative to an absolute ``dataset.data_dir``)."""
    paths = {f"dataset.{k}": cfg.dataset.get(k) for k in ("labels_path", "data_dir")}
    if resolve_data_dir(cfg.dataset.get("data_dir")) is None:
        paths["dataset.params.path"] = (cfg.dataset.get("params") or {}).get("path")
    for key, value in paths.items():
        if value and not Path(str(value)).expanduser().is_absolute():
            raise ConfigError(
                f"{key} must be an absolute path under `flwr run`, got {value!r}: the "
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
