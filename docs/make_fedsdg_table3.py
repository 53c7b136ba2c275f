"""The FedSDG-FS Table III reproduction tables from run folders (docs/fedsdg_fs.md).

Li et al. 2023, "FedSDG-FS: Efficient and Secure Feature Selection for Vertical Federated
Learning", INFOCOM, Table III. Reads every completed cross-validated run under ROOT (as written
by ``vflfs-run -m +experiment=fedsdg_table3``) and prints markdown:

* test accuracy % / ratio of selected features, mean ± std over the folds, each beside the
  paper's figure, and the held-out ceiling of docs/spec.md section 8;
* prediction-time communication: bytes a prediction sends per sample (parties to server);
* FedSDG-FS against the paper and against the held-out ceiling, in points;
* wall time per method (all folds), with the secure scoring phases.

    python docs/make_fedsdg_table3.py sweeps/table3 > /tmp/table3.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from vflfs.report.published import HELDOUT, TABLE3, TABLE3_COLUMNS

DATASETS = ["madelon", "arcene", "basehock", "pcmac", "relathe", "coil20", "isolet"]
METHODS = {  # our strategy -> label
    "vfl": "all features",
    "gini_filter": "Gini filter (MS-GINI)",
    "fstat_filter": "F-statistic filter (SFFS)",
    "stg": "original-Gate (`stg`)",
    "fedsdg_fs": "FedSDG-FS",
}
SCORING = ("gini", "fstat", "selection")  # the secure scoring phases
PAPER = {c.strategy: i for i, c in enumerate(TABLE3_COLUMNS) if c.strategy}


def load(root: Path) -> dict[tuple[str, str], dict]:
    """(dataset, strategy) -> per-fold figures of the completed cross-validated run."""
    runs = {}
    for path in sorted(root.rglob("results.json")):
        summary = json.loads(path.read_text())
        if summary.get("status") != "completed" or "cv" not in summary:
            continue
        folds = summary["folds"]
        runs[(summary["dataset"], summary["strategy"])] = {
            "acc": np.array(summary["cv"]["test_metric"]["values"]) * 100,
            "ratio": np.array([f["selection"]["ratio"] for f in folds]),
            "bytes": np.array([f["prediction_bytes_per_sample"] for f in folds]),
            # The run's total (older results kept the time since the start in each fold).
            "wall": max(summary["wall_time_s"]["total"], folds[-1]["wall_time_s"]["total"]),
            "scoring": sum(f["wall_time_s"].get(p, 0) for f in folds for p in SCORING),
            "epochs": summary["config"]["training"]["epochs"],
        }
    return runs


def pm(values: np.ndarray, digits: int = 1) -> str:
    return f"{values.mean():.{digits}f} ± {values.std(ddof=1):.{digits}f}"


def accuracy_table(runs: dict) -> list[str]:
    head = ["dataset", *METHODS.values(), "held-out ceiling"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in DATASETS:
        cells = [d.upper()]
        for s in METHODS:
            run = runs.get((d, s))
            ours = f"{pm(run['acc'])} / {run['ratio'].mean():.2f}" if run else "-"
            acc, ratio = TABLE3[d.upper()][PAPER[s]]
            cells.append(f"{ours} ({acc:g} / {ratio:g})")
        cells.append(HELDOUT[d.upper()][2])
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def communication_table(runs: dict) -> list[str]:
    head = ["dataset", "all features", "`stg`", "FedSDG-FS", "FedSDG-FS vs all features"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in DATASETS:
        b = {s: runs[(d, s)]["bytes"].mean() for s in ("vfl", "stg", "fedsdg_fs") if (d, s) in runs}
        if len(b) < 3:
            continue
        saving = 100 * (1 - b["fedsdg_fs"] / b["vfl"])
        lines.append(
            f"| {d.upper()} | {b['vfl']:.0f} B | {b['stg']:.0f} B | {b['fedsdg_fs']:.0f} B | "
            f"{saving:.0f}% fewer |"
        )
    return lines


def gap_table(runs: dict) -> list[str]:
    head = ["dataset", "FedSDG-FS (ours)", "paper", "ours - paper", "held-out ceiling",
            "ours - ceiling", "best of ours (method)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in DATASETS:
        run = runs.get((d, "fedsdg_fs"))
        if not run:
            continue
        ours = run["acc"].mean()
        paper = TABLE3[d.upper()][PAPER["fedsdg_fs"]][0]
        ceiling = HELDOUT[d.upper()][1]
        best = max((r["acc"].mean(), s) for (dd, s), r in runs.items() if dd == d)
        lines.append(
            f"| {d.upper()} | {ours:.1f} | {paper:g} | {ours - paper:+.1f} | {ceiling:g} | "
            f"{ours - ceiling:+.1f} | {best[0]:.1f} ({best[1]}) |"
        )
    return lines


def time_table(runs: dict) -> list[str]:
    head = ["dataset", *METHODS.values()]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for d in DATASETS:
        cells = [d.upper()]
        for s in METHODS:
            run = runs.get((d, s))
            if not run:
                cells.append("-")
                continue
            text = f"{run['wall'] / 60:.1f} min ({run['epochs']} ep.)"
            if run["scoring"]:
                text += f", scoring {run['scoring'] / 60:.1f} min"
            cells.append(text)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", type=Path, help="the Table III sweep folder")
    args = p.parse_args(argv)
    runs = load(args.root)
    for title, table in (
        ("Test accuracy % / ratio of selected features (paper's in brackets)", accuracy_table),
        ("Bytes sent per predicted sample (parties to server)", communication_table),
        ("FedSDG-FS against the paper and the held-out ceiling (accuracy points)", gap_table),
        ("Wall time, 5 folds (secure scoring phases included)", time_table),
    ):
        print(f"### {title}\n")
        print("\n".join(table(runs)) + "\n")


if __name__ == "__main__":
    main()
