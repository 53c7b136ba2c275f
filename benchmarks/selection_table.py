"""The selection benchmark's tables: one row per job, then mean ± std per (shape, strategy).

``gap`` is the oracle's test accuracy minus the strategy's, seed by seed, averaged (positive:
the strategy falls short of the oracle); ``gap_vfl`` the same against the VFL oracle (the
relevant columns at their own parties), where the benchmark ran one. The summary lands as CSV,
JSON and a markdown table, with an ``all shapes`` row per strategy (the means over shapes).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

ORACLE = "oracle"
ORACLE_VFL = "oracle_vfl"
ALL_SHAPES = "all shapes"
JOB_COLUMNS = (
    "shape",
    "strategy",
    "seed",
    "status",
    "test_metric",
    "precision",
    "recall",
    "kept",
    "total",
    "mb",
    "wall_s",
    "epochs_run",
)


def job_row(shape: str, strategy: str, seed: int, summary: dict | None) -> dict:
    """One job's figures from its ``results.json`` content (None: the job failed)."""
    row: dict = {"shape": shape, "strategy": strategy, "seed": seed}
    if summary is None:
        return {**row, "status": "failed"} | {k: math.nan for k in JOB_COLUMNS[4:]}
    selection = summary["selection"]
    return {
        **row,
        "status": "completed",
        "test_metric": float(summary["test_metric"]),
        "precision": float(selection.get("precision", math.nan)),
        "recall": float(selection.get("recall", math.nan)),
        "kept": int(selection["selected_features"]),
        "total": int(selection["total_features"]),
        "mb": float(summary["communication"]["mb"]),
        "wall_s": float(summary["wall_time_s"]["total"]),
        "epochs_run": int(summary["epochs_run"]),
    }


def with_gap(jobs: pd.DataFrame) -> pd.DataFrame:
    """``jobs`` with ``gap`` and ``gap_vfl``: the same shape and seed's oracle (VFL oracle)
    accuracy minus this one's."""
    key = pd.MultiIndex.from_frame(jobs[["shape", "seed"]])

    def gap(name: str) -> pd.Series:
        oracle = jobs[jobs.strategy == name].set_index(["shape", "seed"])["test_metric"]
        return oracle.reindex(key).to_numpy() - jobs["test_metric"].to_numpy()

    return jobs.assign(gap=gap(ORACLE), gap_vfl=gap(ORACLE_VFL))


def summarize(jobs: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std over seeds per (shape, strategy), in the order the jobs ran."""
    jobs = with_gap(jobs)
    groups = jobs.groupby(["shape", "strategy"], sort=False)
    table = groups.agg(
        seeds=("seed", "size"),
        failed=("status", lambda s: int((s != "completed").sum())),
        acc_mean=("test_metric", "mean"),
        acc_std=("test_metric", "std"),
        gap_mean=("gap", "mean"),
        gap_vfl_mean=("gap_vfl", "mean"),
        precision=("precision", "mean"),
        recall=("recall", "mean"),
        kept=("kept", "mean"),
        total=("total", "mean"),
        mb=("mb", "mean"),
        wall_s=("wall_s", "mean"),
    ).reset_index()
    table["acc_std"] = table["acc_std"].fillna(0.0)
    overall = (
        table.groupby("strategy", sort=False)
        .agg(
            seeds=("seeds", "sum"),
            failed=("failed", "sum"),
            acc_mean=("acc_mean", "mean"),
            gap_mean=("gap_mean", "mean"),
            gap_vfl_mean=("gap_vfl_mean", "mean"),
            precision=("precision", "mean"),
            recall=("recall", "mean"),
            mb=("mb", "mean"),
            wall_s=("wall_s", "mean"),
        )
        .reset_index()
        .assign(shape=ALL_SHAPES)
    )
    return pd.concat([table, overall], ignore_index=True)


def _fmt(value: float, spec: str) -> str:
    return (
        "–"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else (format(value, spec))
    )


def markdown(summary: pd.DataFrame) -> str:
    """The summary as a markdown table (accuracy and gap in percentage points)."""
    lines = [
        "| shape | strategy | test acc % | gap to oracle (pp) | gap to VFL oracle (pp) | "
        "precision | recall | kept / of | MB | wall s | seeds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary.itertuples(index=False):
        acc = _fmt(100 * r.acc_mean, ".1f")
        if r.shape != ALL_SHAPES:
            acc += f" ± {_fmt(100 * r.acc_std, '.1f')}"
        kept = "" if r.shape == ALL_SHAPES else f"{_fmt(r.kept, '.0f')} / {_fmt(r.total, '.0f')}"
        seeds = f"{r.seeds}" + (f" ({r.failed} failed)" if r.failed else "")
        lines.append(
            f"| {r.shape} | {r.strategy} | {acc} | {_fmt(100 * r.gap_mean, '+.1f')} | "
            f"{_fmt(100 * r.gap_vfl_mean, '+.1f')} | "
            f"{_fmt(r.precision, '.2f')} | {_fmt(r.recall, '.2f')} | {kept} | "
            f"{_fmt(r.mb, '.1f')} | {_fmt(r.wall_s, '.1f')} | {seeds} |"
        )
    return "\n".join(lines) + "\n"


def write_tables(rows: list[dict], out: Path) -> pd.DataFrame:
    """``jobs.csv``, ``summary.csv``, ``summary.json`` and ``summary.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    jobs = pd.DataFrame(rows, columns=list(JOB_COLUMNS))
    jobs.to_csv(out / "jobs.csv", index=False)
    summary = summarize(jobs)
    summary.to_csv(out / "summary.csv", index=False)
    records = json.loads(summary.to_json(orient="records"))
    (out / "summary.json").write_text(json.dumps({"summary": records}, indent=2))
    (out / "summary.md").write_text(markdown(summary))
    return summary
