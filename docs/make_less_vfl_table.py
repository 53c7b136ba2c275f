"""The LESS-VFL reproduction table and plots from run folders (docs/less_vfl.md).

Castiglia et al. 2023, "LESS-VFL: Communication-Efficient Feature Selection for Vertical
Federated Learning", ICML, Table 2 / Table 3 / Figures 3-4. Reads every completed run under
``ROOT/<experiment>/`` (as written by ``python -m benchmarks.less_vfl run`` or ``vflfs-run -m
+experiment=<experiment> hydra.sweep.dir=ROOT/<experiment>``) and writes, for each setting,

* a markdown table: cost to target (MB on the wire, and the paper's analytic upload count),
  final test accuracy, spurious features removed, features and components kept;
* ``acc_vs_mb_<setting>.png`` and ``spurious_vs_epoch_<setting>.png``.

    python docs/make_less_vfl_table.py outputs/less_vfl --out docs/less_vfl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from vflfs.report.cost_to_target import (  # noqa: E402
    cost_to_target,
    format_cost,
    reference_metric,
    summarize_costs,
)

# setting -> (experiment folder with the noisy runs, experiment folder of VFL (original))
SETTINGS = {
    "Phishing (3 parties, 50%)": ("less_vfl_phishing", "less_vfl_phishing_original"),
    "SYLVA (4 parties, 50%)": ("less_vfl_sylva", "less_vfl_sylva_original"),
    "SYLVA uneven (80/25/10/0%)": ("less_vfl_sylva_uneven", "less_vfl_sylva_original"),
}
METHODS = {  # strategy name in the noisy sweeps -> label
    "vfl": "VFL (spurious)",
    "group_lasso": "Group lasso",
    "local_lasso": "Local lasso",
    "less_vfl": "LESS-VFL",
}
ORIGINAL = "VFL (original)"


def load_runs(folder: Path) -> list[dict]:
    """Completed runs under ``folder``: results.json and history.csv of each."""
    runs = []
    for results in sorted(folder.glob("*/results.json")):
        summary = json.loads(results.read_text())
        if summary.get("status") != "completed":
            continue
        history = pd.read_csv(results.parent / "history.csv")
        runs.append({"summary": summary, "history": history})
    return runs


def by_method(runs: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for run in runs:
        out.setdefault(METHODS[run["summary"]["strategy"]], []).append(run)
    return out


def mean_std(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    v = np.asarray(values, dtype=float) * scale
    if len(v) == 0:
        return "-"
    if len(v) == 1:
        return f"{v[0]:.{digits}f}"
    return f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}"


def table_rows(groups: dict[str, list[dict]], reference: float) -> list[list[str]]:
    rows = []
    for name, runs in groups.items():
        final = [r["history"].iloc[-1] for r in runs]
        costs = {
            (col, fraction): summarize_costs(
                [cost_to_target(r["history"], reference, fraction=fraction, cost=col) for r in runs]
            )
            for col, fraction in (("mb", 0.9), ("analytic_mb", 0.9), ("mb", 0.99))
        }
        cells = {k: "-" if name == ORIGINAL else format_cost(v) for k, v in costs.items()}
        removed = [f.get("spurious_removed", np.nan) for f in final]
        kept = [f.get("components_kept", np.nan) for f in final]
        rows.append(
            [
                name,
                cells[("mb", 0.9)],
                cells[("analytic_mb", 0.9)],
                cells[("mb", 0.99)],
                mean_std([f["test_metric"] for f in final], 100),
                "-" if name == ORIGINAL else mean_std(removed, 100, 0),
                mean_std([f["selected_features"] for f in final], 1, 0),
                "-" if np.isnan(kept).all() else mean_std(kept, 1, 0),
                mean_std([f["mb"] for f in final]),
                str(len(runs)),
            ]
        )
    return rows


HEADER = [
    "method",
    "cost to target, MB (wire)",
    "cost to target, MB (analytic)",
    "cost to 0.99 x ref., MB (wire)",
    "final test acc. %",
    "spurious removed %",
    "features kept",
    "components kept",
    "total MB",
    "runs",
]


def markdown(setting: str, reference: float, rows: list[list[str]]) -> str:
    lines = [
        f"**{setting}**: target = 0.9 x {100 * reference:.2f}% = {90 * reference:.2f}% test "
        "accuracy and >= 80% of the spurious features removed",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def mean_curve(runs: list[dict], x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    n = min(len(r["history"]) for r in runs)
    xs = np.mean([r["history"][x].to_numpy()[:n] for r in runs], axis=0)
    ys = np.mean([r["history"][y].to_numpy()[:n] for r in runs], axis=0)
    return xs, ys


def plot(setting: str, slug: str, groups: dict[str, list[dict]], out: Path) -> list[Path]:
    files = []
    for name, (x, y, ylabel, scale) in {
        f"acc_vs_mb_{slug}.png": ("mb", "test_metric", "test accuracy (%)", 100),
        f"spurious_vs_epoch_{slug}.png": ("epoch", "spurious_removed", "spurious removed (%)", 100),
    }.items():
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for method, runs in groups.items():
            if y not in runs[0]["history"]:
                continue
            xs, ys = mean_curve(runs, x, y)
            ax.plot(xs, ys * scale, label=f"{method} ({len(runs)})")
        ax.set_xlabel("MB communicated (both directions)" if x == "mb" else "epoch")
        ax.set_ylabel(ylabel)
        ax.set_title(setting)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        files.append(out / name)
    return files


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", type=Path)
    p.add_argument("--out", type=Path, default=Path("docs/less_vfl"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    parts = []
    for setting, (noisy, original) in SETTINGS.items():
        originals = load_runs(args.root / original)
        runs = load_runs(args.root / noisy)
        if not originals or not runs:
            continue
        reference = reference_metric(r["history"] for r in originals)
        groups = {ORIGINAL: originals, **by_method(runs)}
        groups = {k: groups[k] for k in [ORIGINAL, *METHODS.values()] if k in groups}
        parts.append(markdown(setting, reference, table_rows(groups, reference)))
        plot(setting, noisy.removeprefix("less_vfl_"), groups, args.out)
    text = "\n".join(parts)
    (args.out / "table.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
