"""The regularisation path (``results.json`` ``path``): two figures per table row (dataset).

- ``path_val_vs_features_<row>.png``: validation score against the features kept at each
  point of the path (log scale when the counts span more than two decades).
- ``path_val_vs_mb_<row>.png``: validation score against the MB communicated up to each point.

One line per run (or fold) following its path, one colour per table column: a square marks
the dense model (penalty 0), a star the point the run chose (``extra.path_choice.point``), an
open star where the refit fell back to the dense model. A dotted line is the runs' mean
``baseline_test_metric`` (predicting without features). Runs without a path are left out and
named in a message.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from vflfs.report.collect import iter_folds
from vflfs.report.figures import Drawn, colours, label, new_figure, save, slug

Palette = dict[tuple[Any, ...], Any]
COLUMNS = ("point", "penalty", "kept", "mb", "val_metric")
MAX_NAMED = 5  # runs named in a "left out" message


@dataclass(frozen=True)
class PathRun:
    """One run's (or fold's) path, with the table cell it belongs to and its choice."""

    row: tuple[Any, ...]
    col: tuple[Any, ...]
    name: str
    metric: str
    points: pd.DataFrame  # COLUMNS, one line per point in path order
    chosen: int | None  # the chosen point's ``point``
    fallback: bool  # the refit scored below the dense model: the dense model is reported
    baseline: float | None

    @property
    def chosen_row(self) -> pd.DataFrame:
        return self.points[self.points["point"] == self.chosen]


def path_runs(
    table: pd.DataFrame, results: dict[str, dict], rows: list[str], cols: list[str]
) -> tuple[list[PathRun], list[tuple[tuple[Any, ...], str]]]:
    """The runs (folds) of ``table`` that record a path, and (row, name) of those that do not."""
    found: list[PathRun] = []
    missing: list[tuple[tuple[Any, ...], str]] = []
    for record in table.drop_duplicates(["run_dir", "fold"]).to_dict("records"):
        run = results.get(str(record["run_dir"]), {})
        folds = dict(iter_folds(run))
        entry = folds.get(int(record["fold"]), {})
        name = str(record["run"]) + (f" fold {record['fold']}" if len(folds) > 1 else "")
        row = tuple(record.get(c) for c in rows)
        points = _points(entry.get("path"))
        if points is None:
            missing.append((row, name))
            continue
        choice = (entry.get("extra") or {}).get("path_choice") or {}
        baseline = entry.get("baseline_test_metric")
        found.append(
            PathRun(
                row=row,
                col=tuple(record.get(c) for c in cols),
                name=name,
                metric=str(entry.get("metric") or record.get("metric") or ""),
                points=points,
                chosen=int(choice["point"]) if "point" in choice else None,
                fallback=choice.get("fallback") == "dense",
                baseline=float(baseline) if isinstance(baseline, int | float) else None,
            )
        )
    return found, missing


def plot_paths(
    table: pd.DataFrame,
    results: dict[str, dict],
    out_dir: Path,
    rows: list[str],
    cols: list[str],
    legend: str = "",
) -> Drawn:
    """Both path figures for every table row with a path; messages for runs without one."""
    runs, missing = path_runs(table, results, rows, cols)
    drawn = Drawn()
    if not runs:
        drawn.messages.append("no run records a regularisation path (path): no path plots")
        return drawn
    palette = colours(tuple(r.get(c) for c in cols) for r in table.to_dict("records"))
    by_row: dict[str, list[PathRun]] = {}
    for run in runs:
        by_row.setdefault(label(run.row), []).append(run)
    left_out: dict[str, list[str]] = {}
    for row, name in missing:
        left_out.setdefault(label(row), []).append(name)
    for name in sorted(set(by_row) | set(left_out)):
        group, absent = by_row.get(name, []), left_out.get(name, [])
        if absent:
            drawn.messages.append(_left_out(name, absent, bool(group)))
        if group:
            for x, stem in (("kept", "path_val_vs_features"), ("mb", "path_val_vs_mb")):
                fig = path_figure(group, name, x, palette, legend)
                drawn.files.append(save(fig, out_dir / f"{stem}_{slug(name)}.png"))
    return drawn


def path_figure(
    group: list[PathRun], name: str, x: str, palette: Palette, legend: str = ""
) -> Figure:
    """Validation score against ``x`` (``kept`` or ``mb``) for the runs of one table row."""
    metrics = {r.metric for r in group}
    scale = 100.0 if metrics == {"accuracy"} else 1.0
    metric = "accuracy (%)" if scale == 100.0 else " / ".join(sorted(metrics))
    fig, axes = new_figure()
    ax = axes[0][0]
    handles = _draw_runs(ax, group, x, scale, palette)
    baselines = [r.baseline for r in group if r.baseline is not None]
    if baselines:
        ax.axhline(np.mean(baselines) * scale, color="gray", ls=":", lw=1.2)
        handles.append(Line2D([], [], color="gray", ls=":", label="baseline (no features, test)"))
    handles += _marker_handles(group)
    if x == "kept":
        ax.set_xlabel("features kept (all parties)")
        title = "features kept"
    else:
        ax.set_xlabel("MB communicated up to the point (cumulative, both directions)")
        title = "MB"
    _x_scale(ax, pd.concat([r.points[x] for r in group]))
    ax.set_ylabel(f"validation {metric}")
    ax.set_title(f"{name}: regularisation path, validation score vs {title}")
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, fontsize="small", title=legend or None)
    return fig


def _draw_runs(ax: Any, group: list[PathRun], x: str, scale: float, palette: Palette) -> list:
    """A line with point markers per run, a square at its dense point (penalty 0), a star at
    its chosen point; the colours' legend handles back."""
    counts: dict[tuple[Any, ...], int] = {}
    for run in group:
        counts[run.col] = counts.get(run.col, 0) + 1
    for run in group:
        colour = palette.get(run.col, "black")
        y = run.points["val_metric"] * scale
        ax.plot(run.points[x], y, color=colour, lw=1.4, marker="o", ms=3.5, alpha=0.85)
        dense = run.points["penalty"] == 0
        edge = {"markeredgecolor": "black", "markeredgewidth": 0.8}
        ax.plot(run.points[x][dense], y[dense], ls="none", marker="s", ms=6, color=colour, **edge)
        chosen = run.chosen_row
        if not chosen.empty:
            face = "none" if run.fallback else colour
            y = chosen["val_metric"] * scale
            ax.scatter(
                chosen[x],
                y,
                marker="*",
                s=220,
                zorder=3,
                facecolors=face,
                edgecolors=colour,
                linewidths=1.4,
            )
    order = sorted(counts, key=lambda k: list(palette).index(k) if k in palette else 0)
    return [
        Line2D(
            [],
            [],
            color=palette.get(c, "black"),
            lw=1.4,
            marker="o",
            ms=3.5,
            label=f"{label(c)} (n={counts[c]})",
        )
        for c in order
    ]


def _marker_handles(group: list[PathRun]) -> list[Line2D]:
    star = {"marker": "*", "ls": "none", "ms": 13, "color": "black"}
    handles = []
    if any((r.points["penalty"] == 0).any() for r in group):
        square = {
            "marker": "s",
            "ls": "none",
            "ms": 6,
            "color": "white",
            "markeredgecolor": "black",
        }
        handles.append(Line2D([], [], **square, label="dense model (penalty 0)"))
    if any(r.chosen is not None and not r.fallback for r in group):
        handles.append(Line2D([], [], **star, label="chosen point"))
    if any(r.chosen is not None and r.fallback for r in group):
        handles.append(
            Line2D([], [], **star, markerfacecolor="none", label="chosen; dense model reported")
        )
    return handles


def _x_scale(ax: Any, values: pd.Series) -> None:
    """Log scale when the positive values span more than two decades (symlog with zeros)."""
    positive = values[values > 0]
    if positive.empty or positive.max() / positive.min() <= 100:
        return
    if (values <= 0).any():  # nothing kept at the path's end: linear from 0 to the least
        ax.set_xscale("symlog", linthresh=float(positive.min()), linscale=0.5)
        ax.set_xlim(-0.2 * float(positive.min()), float(positive.max()) * 1.5)
    else:
        ax.set_xscale("log")


def _points(path: Any) -> pd.DataFrame | None:
    """The path's points as a frame of :data:`COLUMNS`; None when absent or not usable."""
    if not isinstance(path, list) or not path or not all(isinstance(p, dict) for p in path):
        return None
    frame = pd.DataFrame(path)
    if not {"kept", "mb", "val_metric"} <= set(frame.columns):
        return None
    if "point" not in frame.columns:
        frame["point"] = range(len(frame))
    if "penalty" not in frame.columns:
        frame["penalty"] = np.nan
    frame = frame[list(COLUMNS)].apply(pd.to_numeric, errors="coerce")
    return frame.dropna(subset=["kept", "mb", "val_metric"]).reset_index(drop=True)


def _left_out(name: str, runs: list[str], some_drawn: bool) -> str:
    more = len(runs) - MAX_NAMED
    named = ", ".join(runs[:MAX_NAMED]) + (f" and {more} more" if more > 0 else "")
    if some_drawn:
        return f"{name}: {len(runs)} run(s) without a path left out of the path plots ({named})"
    return f"{name}: no run records a path ({named}): no path plots"
