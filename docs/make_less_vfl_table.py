"""The LESS-VFL reproduction table and plots from run folders (docs/less_vfl.md).

Castiglia et al. 2023, "LESS-VFL: Communication-Efficient Feature Selection for Vertical
Federated Learning", ICML, Table 2 / Table 3 / Figures 3-4. Reads every completed run under
``ROOT/<experiment>/`` (as written by ``python -m benchmarks.less_vfl run`` or ``vflfs-run -m
+experiment=<experiment> hydra.sweep.dir=ROOT/<experiment>``) and writes, for each setting,

* a markdown table: cost to target (MB on the wire, and the paper's analytic upload count),
  final test accuracy, spurious features removed, features and components kept;
* ``acc_vs_mb_<setting>.png`` and ``spurious_vs_epoch_<setting>.png``.

    python docs/make_less_vfl_table.py outputs/less_vfl --out docs/less_vfl

With ``--defaults`` it reads the ``*_defaults`` experiments (each strategy's default
configuration) into ``table_defaults.md`` and ``*_defaults.png``: their runs have stages (a
warm-up or pre-training, a path or the count's choice, refits), so the table names the stage in
which the target was first met and describes the *reported* model (``results.json``: the best
validation epoch of the chosen selection) instead of the last epoch, and the plots draw every
run against MB with a dot where it first met the target (``spurious_vs_mb_*`` instead of
``spurious_vs_epoch_*``).
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
# --defaults: the same settings with each strategy's default configuration (same reference)
DEFAULTS = {k: (f"{noisy}_defaults", original) for k, (noisy, original) in SETTINGS.items()}


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


DEFAULTS_HEADER = [
    "method",
    "cost to target, MB (wire)",
    "cost to target, MB (analytic)",
    "target first met in",
    "cost to 0.99 x ref., MB (wire)",
    "test acc. %",
    "spurious removed %",
    "features kept",
    "components kept",
    "reported model meets target",
    "MB of the run",
    "runs",
]


def first_stage(history: pd.DataFrame, reference: float) -> str | None:
    """The ``stage`` column of the first epoch that meets the target (None: never)."""
    cost = cost_to_target(history.assign(row=range(len(history))), reference, cost="row")
    return None if cost is None else str(history["stage"].iloc[int(cost)])


def stages(histories: list[pd.DataFrame], reference: float) -> str:
    """``"path 2, refit 1"``: in how many runs the target was first met in each stage."""
    found = [first_stage(h, reference) for h in histories]
    names = sorted({f for f in found if f is not None})
    return ", ".join(f"{n} {found.count(n)}" for n in names) or "-"


def reported(run: dict, embedding_size: int = 16) -> dict:
    """The reported model (``results.json``): test accuracy, spurious removed, features and
    embedding components kept (a party's ``components`` null: all of them)."""
    s = run["summary"]
    return {
        "test": float(s["test_metric"]),
        "removed": float(s["selection"].get("spurious_removed", np.nan)),
        "kept": int(s["selection"]["selected_features"]),
        "components": sum(
            embedding_size if p.get("components") is None else int(p["components"])
            for p in s["parties"]
        ),
    }


def defaults_rows(groups: dict[str, list[dict]], reference: float) -> list[list[str]]:
    rows = []
    for name, runs in groups.items():
        costs = {
            (col, fraction): format_cost(
                summarize_costs(
                    [
                        cost_to_target(r["history"], reference, fraction=fraction, cost=col)
                        for r in runs
                    ]
                )
            )
            for col, fraction in (("mb", 0.9), ("analytic_mb", 0.9), ("mb", 0.99))
        }
        models = [reported(r) for r in runs]
        noisy = name != ORIGINAL
        meets = sum(m["test"] >= 0.9 * reference and m["removed"] >= 0.8 for m in models)
        rows.append(
            [
                name,
                costs[("mb", 0.9)] if noisy else "-",
                costs[("analytic_mb", 0.9)] if noisy else "-",
                stages([r["history"] for r in runs], reference) if noisy else "-",
                costs[("mb", 0.99)] if noisy else "-",
                mean_std([m["test"] for m in models], 100),
                mean_std([m["removed"] for m in models], 100, 0) if noisy else "-",
                mean_std([m["kept"] for m in models], 1, 0),
                mean_std([m["components"] for m in models], 1, 0),
                f"{meets}/{len(runs)}" if noisy else "-",
                mean_std([r["history"]["mb"].iloc[-1] for r in runs]),
                str(len(runs)),
            ]
        )
    return rows


STAGES = ["warmup", "pretrain", "stage2", "path", "select d", "select", "refit", "dense"]


def breakdown(run: dict, reference: float) -> dict[str, float] | None:
    """Where the cost to target went: MB per stage up to the first epoch that meets the target
    (stage 2's upload, phase ``stage2``, apart from the first epoch after it; ``select d``: the
    count choice's first training, on all d features); None: never met."""
    h = run["history"]
    at = cost_to_target(h.assign(row=range(len(h))), reference, cost="row")
    if at is None:
        return None
    rows = h.iloc[: int(at) + 1]
    stage = rows["stage"].copy()
    tried = run["summary"]["extra"].get("count_choice", {}).get("tried")
    if tried:  # the count choice's first training: all d features
        stage[(stage == "select") & (rows["epoch"] < tried[0]["epochs"][1])] = "select d"
    spent = rows["mb"].diff().fillna(rows["mb"].iloc[0]).groupby(stage).sum().to_dict()
    stage2 = run["summary"]["communication"]["phases"].get("stage2", {}).get("mb", 0.0)
    after = [s for s in ("select d", "select", "dense") if s in spent]
    if stage2 and after:
        spent[after[0]] -= stage2
        spent["stage2"] = stage2
    return spent


def breakdown_table(groups: dict[str, list[dict]], reference: float) -> str:
    """Mean MB per stage until the target, over the runs that met it."""
    found = {
        name: [b for b in (breakdown(r, reference) for r in runs) if b is not None]
        for name, runs in groups.items()
        if name != ORIGINAL
    }
    columns = [s for s in STAGES if any(s in b for parts in found.values() for b in parts)]
    lines = [
        "| method | runs | " + " | ".join(columns) + " | cost to target |",
        "|" + "---|" * (len(columns) + 3),
    ]
    for name, parts in found.items():
        if not parts:
            continue
        cells = [
            mean_std([b.get(c, 0.0) for b in parts]) if any(c in b for b in parts) else "-"
            for c in columns
        ]
        total = mean_std([sum(b.values()) for b in parts])
        lines.append(f"| {name} | {len(parts)} | " + " | ".join(cells) + f" | {total} |")
    return "\n".join(lines) + "\n"


def markdown(
    setting: str, reference: float, rows: list[list[str]], header: list[str] = HEADER
) -> str:
    lines = [
        f"**{setting}**: target = 0.9 x {100 * reference:.2f}% = {90 * reference:.2f}% test "
        "accuracy and >= 80% of the spurious features removed",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def mean_curve(runs: list[dict], x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    n = min(len(r["history"]) for r in runs)
    xs = np.mean([r["history"][x].to_numpy()[:n] for r in runs], axis=0)
    ys = np.mean([r["history"][y].to_numpy()[:n] for r in runs], axis=0)
    return xs, ys


def draw_runs(ax, runs: list[dict], x: str, y: str, scale: float, label: str, reference: float):
    """One line per run, a dot where it first met the target."""
    colour = None
    for i, run in enumerate(runs):
        h = run["history"]
        line = ax.plot(
            h[x], h[y] * scale, color=colour, lw=0.9, alpha=0.8, label=label if i == 0 else None
        )
        colour = line[0].get_color()
        at = cost_to_target(h.assign(row=range(len(h))), reference, cost="row")
        if at is not None:
            ax.plot(h[x].iloc[int(at)], h[y].iloc[int(at)] * scale, "o", color=colour, ms=5)


def plot(
    setting: str,
    slug: str,
    groups: dict[str, list[dict]],
    out: Path,
    reference: float | None = None,
) -> list[Path]:
    """The two figures of a setting: mean curves over the seeds (cut to the shortest run), or,
    given the ``reference`` (runs whose stages differ in length), one line per run against
    MB with a dot where it first met the target."""
    figures = {
        f"acc_vs_mb_{slug}.png": ("mb", "test_metric", "test accuracy (%)", 100),
        f"spurious_vs_epoch_{slug}.png": ("epoch", "spurious_removed", "spurious removed (%)", 100),
    }
    if reference is not None:
        figures[f"spurious_vs_mb_{slug}.png"] = figures.pop(f"spurious_vs_epoch_{slug}.png")
        figures[f"spurious_vs_mb_{slug}.png"] = (
            "mb",
            "spurious_removed",
            "spurious removed (%)",
            100,
        )
    files = []
    for name, (x, y, ylabel, scale) in figures.items():
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for method, runs in groups.items():
            if y not in runs[0]["history"]:
                continue
            label = f"{method} ({len(runs)})"
            if reference is not None:
                draw_runs(ax, runs, x, y, scale, label, reference)
                continue
            xs, ys = mean_curve(runs, x, y)
            ax.plot(xs, ys * scale, label=label)
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
    p.add_argument(
        "--defaults",
        action="store_true",
        help="the *_defaults experiments (each strategy's default configuration)",
    )
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    parts = []
    settings = DEFAULTS if args.defaults else SETTINGS
    for setting, (noisy, original) in settings.items():
        originals = load_runs(args.root / original)
        runs = load_runs(args.root / noisy)
        if not originals or not runs:
            continue
        reference = reference_metric(r["history"] for r in originals)
        groups = {ORIGINAL: originals, **by_method(runs)}
        groups = {k: groups[k] for k in [ORIGINAL, *METHODS.values()] if k in groups}
        if args.defaults:
            rows = defaults_rows(groups, reference)
            parts.append(markdown(setting, reference, rows, DEFAULTS_HEADER))
            parts.append(
                "MB per stage until the target (wire):\n\n" + breakdown_table(groups, reference)
            )
        else:
            parts.append(markdown(setting, reference, table_rows(groups, reference)))
        slug = noisy.removeprefix("less_vfl_")
        plot(setting, slug, groups, args.out, reference if args.defaults else None)
    text = "\n".join(parts)
    (args.out / ("table_defaults.md" if args.defaults else "table.md")).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
