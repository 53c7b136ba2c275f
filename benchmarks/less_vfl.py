"""Run the LESS-VFL reproduction sweeps in one process, and the hyper-parameter grid.

Castiglia et al. 2023, "LESS-VFL: Communication-Efficient Feature Selection for Vertical
Federated Learning", ICML, Section 5. Every job of ``conf/experiment/<name>.yaml``'s
``hydra.sweeper.params`` runs through :func:`vflfs.server_app.run.run_experiment` over a
:class:`vflfs.federation.LocalGrid`: the real ClientApp, its operations and message encoding,
in this process (no Ray start-up per job). ``vflfs-run -m +experiment=<name>`` runs the same
jobs as Flower simulations. A job whose folder holds a completed run is skipped.

    python -m benchmarks.less_vfl run less_vfl_phishing less_vfl_phishing_original \\
        --out outputs/less_vfl
    python -m benchmarks.less_vfl tune less_vfl_phishing --out outputs/less_vfl_tune

``tune`` runs the grid of :data:`GRID` on seed 0 and picks, per strategy, the setting with the
best final validation accuracy among those that removed at least 80% of the spurious features
(the paper's rule, with validation instead of training accuracy).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import logging
import time
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from vflfs.client_app.app import app as client_app
from vflfs.federation import LocalGrid
from vflfs.runtime.config import CONF_DIR, compose_config, register_schemas
from vflfs.runtime.output_folder import holds_same_run
from vflfs.server_app.run import run_experiment

# The tuning grid (a subset of the official one, spec section 5). LESS-VFL's runs stop 6 epochs
# after selection; local lasso uses LESS-VFL's pre-training and lambda_m (as the official
# choices for Phishing and SYLVA did); group lasso runs the experiment's full length.
GRID = {
    "less_vfl": {
        "strategy.pretrain_epochs": [1, 4],
        "strategy.party.lam": [0.05, 0.1, 0.15, 0.25],
        "strategy.server.lam": [0.005, 0.05],
    },
    "group_lasso": {
        "strategy.optimizer": ["sgd", "adam"],
        "strategy.lam": [0.25, 0.5, 1.0, 2.0],
    },
}
POST_EPOCHS = 6


def sweep_params(experiment: str) -> dict[str, list[str]]:
    """The experiment's ``hydra.sweeper.params``, each as a list of values."""
    register_schemas()
    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"+experiment={experiment}"], return_hydra_config=True)
    params = cfg.hydra.sweeper.params or {}
    return {str(k): [v.strip() for v in str(params[k]).split(",")] for k in params}


def run_job(overrides: list[str], out_dir: Path) -> dict | None:
    """One run into ``out_dir`` (skipped when it holds this configuration's completed run;
    refused when it holds another's); its summary."""
    cfg = compose_config(overrides)
    if holds_same_run(out_dir, cfg):
        return json.loads((out_dir / "results.json").read_text())
    start = time.perf_counter()
    summary = run_experiment(LocalGrid(client_app, int(cfg.split.num_parties)), cfg, out_dir)
    print(
        f"{out_dir.name:60s} test {summary['final_test_metric']:.4f} "
        f"spurious {summary['selection'].get('spurious_removed', float('nan')):.2f} "
        f"{summary['communication']['mb']:8.1f} MB {time.perf_counter() - start:5.1f} s",
        flush=True,
    )
    return summary


def run_sweep(experiment: str, out: Path) -> None:
    params = sweep_params(experiment)
    for values in itertools.product(*params.values()):
        pairs = [f"{k}={v}" for k, v in zip(params, values, strict=True)]
        run_job([f"+experiment={experiment}", *pairs], out / experiment / ",".join(pairs))


def final_row(folder: Path) -> dict:
    rows = list(csv.DictReader((folder / "history.csv").open()))
    return rows[-1]


def tune(experiment: str, out: Path) -> dict:
    """The grid on seed 0; the chosen setting per strategy."""
    chosen: dict = {}
    for strategy, grid in GRID.items():
        scored = []
        for values in itertools.product(*grid.values()):
            pairs = [f"{k}={v}" for k, v in zip(grid, values, strict=True)]
            extra = []
            if strategy == "less_vfl":
                extra = [f"training.epochs={int(values[0]) + POST_EPOCHS}"]
            folder = out / experiment / strategy / ",".join(pairs)
            run_job(
                [f"+experiment={experiment}", f"strategy={strategy}", "seed=0", *pairs, *extra],
                folder,
            )
            row = final_row(folder)
            scored.append((float(row["val_metric"]), float(row["spurious_removed"]), pairs))
        ok = [s for s in scored if s[1] >= 0.8] or scored
        best = max(ok, key=lambda s: s[0])
        chosen[strategy] = {
            "overrides": best[2],
            "val_metric": best[0],
            "spurious_removed": best[1],
        }
        print(
            f"{experiment} {strategy}: chose {best[2]} (val {best[0]:.4f}, spurious {best[1]:.2f})"
        )
    return chosen


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("command", choices=["run", "tune"])
    p.add_argument("experiments", nargs="+", help="names in conf/experiment/")
    p.add_argument("--out", type=Path, default=Path("outputs/less_vfl"))
    args = p.parse_args(argv)
    logging.getLogger("vflfs").setLevel(logging.WARNING)
    for experiment in args.experiments:
        if args.command == "run":
            run_sweep(experiment, args.out)
        else:
            chosen = tune(experiment, args.out)
            (args.out / experiment / "chosen.json").write_text(json.dumps(chosen, indent=2))


if __name__ == "__main__":
    main()
