"""Choose the FedSDG-FS Table III settings from tuning sweeps, on validation accuracy.

Li et al. 2023, "FedSDG-FS: Efficient and Secure Feature Selection for Vertical Federated
Learning", INFOCOM, Table III. The tuning sweeps are ordinary ``vflfs-run -m`` sweeps on one
hold-out split (``cv.folds=1``, seed 0; docs/fedsdg_fs.md gives the commands). For every
dataset and strategy this picks the setting with the best validation accuracy (of the model at
its best validation epoch); ties go to the smaller ratio of selected features, then to the
smaller regulariser, then fewer epochs. ``--max-epochs E`` (or ``DATASET=E``) scores a longer
run as if it had stopped after E epochs (its best validation epoch among the first E, read
from history.csv: training is the same up to there), so long tuning runs also tune shorter
budgets. It prints the choices as the ``table3`` block of
``conf/experiment/fedsdg_table3.yaml``, which the 5-fold cross-validated run then uses:

    python -m benchmarks.fedsdg_table3 sweeps/table3_tuning --max-epochs 40 madelon=400
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

# The knobs a tuning sweep varies; anything else in a job's folder name is common to the sweep.
KNOBS = (
    "training.lr",
    "training.epochs",
    "strategy.sigma",
    "strategy.lambda_input",
    "strategy.lambda_embedding",
)
FILTERS = ("gini_filter", "fstat_filter")


def setting(summary: dict) -> dict[str, float]:
    """The tuning knobs of one run, read from its resolved config."""
    values: dict[str, float] = {}
    for knob in KNOBS:
        node = summary["config"]
        for part in knob.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            values[knob] = node
    return values


def best_epoch(folder: Path, epochs: int | None) -> dict:
    """The history row of the best validation epoch among the first ``epochs`` (all if None);
    the first such epoch on ties, as the run itself keeps the first best model."""
    history = pd.read_csv(folder / "history.csv")
    if epochs is not None:
        history = history[history["epoch"] < epochs]
    return history.loc[history["val_metric"].idxmax()].to_dict()


def epoch_caps(items: list[str]) -> dict[str | None, int]:
    """``["40", "madelon=400"]`` -> ``{None: 40, "madelon": 400}`` (None: every other dataset)."""
    caps: dict[str | None, int] = {}
    for item in items:
        name, _, value = item.rpartition("=")
        caps[name or None] = int(value)
    return caps


def load(roots: list[Path], caps: dict[str | None, int] | None = None) -> list[dict]:
    """Every completed single-split run under ``roots``: dataset, strategy, validation score
    and ratio at its best epoch within the dataset's epoch cap, knobs."""
    caps = caps or {}
    runs = []
    for root in roots:
        for path in sorted(root.rglob("results.json")):
            summary = json.loads(path.read_text())
            if summary.get("status") != "completed" or "cv" in summary:
                continue
            cap = caps.get(summary["dataset"], caps.get(None))
            epochs = int(summary["epochs_run"])
            if cap is not None:
                epochs = min(epochs, cap)
            row = best_epoch(path.parent, epochs)
            knobs = setting(summary)
            knobs["training.epochs"] = epochs
            runs.append(
                {
                    "dataset": summary["dataset"],
                    "strategy": summary["strategy"],
                    "val": float(row["val_metric"]),
                    "test": float(row["test_metric"]),
                    "ratio": float(row["selection_ratio"]),
                    "setting": knobs,
                    "folder": str(path.parent),
                }
            )
    return runs


def choose(runs: list[dict]) -> dict[tuple[str, str], dict]:
    """Per (dataset, strategy): best validation accuracy, then fewer features, then less
    regularisation, then fewer epochs."""

    def rank(run: dict) -> tuple:
        s = run["setting"]
        lam = s.get("strategy.lambda_input", 0.0) + s.get("strategy.lambda_embedding", 0.0)
        return (-run["val"], run["ratio"], lam, s.get("training.epochs", 0))

    best: dict[tuple[str, str], dict] = {}
    for run in runs:
        key = (run["dataset"], run["strategy"])
        if key not in best or rank(run) < rank(best[key]):
            best[key] = run
    return best


def with_filters(best: dict[tuple[str, str], dict]) -> dict[tuple[str, str], dict]:
    """The filters keep a fixed half of the features and then train like all-features VFL:
    they take VFL's chosen learning rate and epochs."""
    out = dict(best)
    for (dataset, strategy), run in best.items():
        if strategy == "vfl":
            for name in FILTERS:
                out.setdefault((dataset, name), {**run, "ratio": 0.5})
    return out


def as_yaml(best: dict[tuple[str, str], dict]) -> str:
    """The ``table3`` block: dataset -> strategy -> the chosen knobs (short names)."""
    lines = ["table3:"]
    for dataset in sorted({d for d, _ in best}):
        lines.append(f"  {dataset}:")
        for (d, strategy), run in sorted(best.items()):
            if d != dataset:
                continue
            knobs = ", ".join(f"{k.split('.')[-1]}: {v}" for k, v in run["setting"].items())
            note = (
                "as vfl"
                if strategy in FILTERS
                else f"val {100 * run['val']:.1f}, ratio {run['ratio']:.2f}"
            )
            lines.append(f"    {strategy}: {{{knobs}}} # {note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("roots", nargs="+", type=Path, help="folders of tuning sweeps")
    p.add_argument(
        "--max-epochs",
        nargs="+",
        default=[],
        metavar="[DATASET=]E",
        help="score longer runs as if they had stopped after E epochs",
    )
    args = p.parse_args(argv)
    runs = load(args.roots, epoch_caps(args.max_epochs))
    if not runs:
        raise SystemExit(f"no completed runs under {', '.join(map(str, args.roots))}")
    print(f"{len(runs)} tuning runs")
    print(as_yaml(with_filters(choose(runs))))


if __name__ == "__main__":
    main()
