"""Curves from ``history.csv``: one figure per table row (dataset), one colour per column.

- ``metric_vs_mb_<row>.png``: test accuracy (%) or R^2 against the MB communicated so far.
- ``features_vs_epoch_<row>.png``: selected features (ratio, else count) per epoch, and the
  share of spurious features removed where the history records ``spurious_removed``.

Each run (or fold) is a thin line; the thick line of a colour is the epoch-wise mean of that
column's runs, labelled with their count. Figures whose columns are absent are skipped with a
message. Per-party importance pictures are in :mod:`vflfs.report.importance_plots`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from vflfs.report.figures import Drawn, colours, label, new_figure, save, slug
from vflfs.report.history import Curve

Palette = dict[tuple[Any, ...], Any]


def plot_curves(curves: list[Curve], out_dir: Path, legend: str = "") -> Drawn:
    """Both curve figures for every table row; ``legend`` names the colours (the columns)."""
    drawn = Drawn()
    if not curves:
        drawn.messages.append("no history.csv in the selected runs: no curve plots")
        return drawn
    palette = colours(c.col for c in curves)
    rows: dict[str, list[Curve]] = {}
    for curve in curves:
        rows.setdefault(label(curve.row), []).append(curve)
    for name, group in sorted(rows.items()):
        drawn.extend(plot_metric_vs_mb(group, name, palette, out_dir, legend))
        drawn.extend(plot_features_vs_epoch(group, name, palette, out_dir, legend))
    return drawn


def plot_metric_vs_mb(
    group: list[Curve], name: str, palette: Palette, out_dir: Path, legend: str = ""
) -> Drawn:
    """Test score against cumulative MB, one colour per table column."""
    usable = [c for c in group if {"mb", "test_metric"} <= set(c.frame.columns)]
    if not usable:
        return Drawn(messages=[f"{name}: history.csv lacks mb/test_metric: no metric-vs-MB plot"])
    metrics = {c.metric for c in usable}
    percent = metrics == {"accuracy"}
    fig, axes = new_figure()
    ax = axes[0][0]
    _draw(ax, usable, "mb", "test_metric", 100.0 if percent else 1.0, palette)
    metric = "accuracy (%)" if percent else " / ".join(sorted(metrics))
    ax.set_xlabel("MB communicated (cumulative, both directions)")
    ax.set_ylabel(f"test {metric}")
    ax.set_title(f"{name}: test {metric} vs communication")
    mb = pd.concat([c.frame["mb"] for c in usable])
    if mb.min() > 0 and mb.max() / mb.min() > 100:
        ax.set_xscale("log")
    ax.legend(fontsize="small", title=legend or None)
    return Drawn(files=[save(fig, out_dir / f"metric_vs_mb_{slug(name)}.png")])


def plot_features_vs_epoch(
    group: list[Curve], name: str, palette: Palette, out_dir: Path, legend: str = ""
) -> Drawn:
    """Selected features per epoch, and spurious features removed where recorded."""
    column = _first_present(group, ("selection_ratio", "selected_features"))
    if column is None:
        return Drawn(
            messages=[
                f"{name}: history.csv lacks selection_ratio/selected_features: "
                "no features-vs-epoch plot"
            ]
        )
    spurious = [c for c in group if "spurious_removed" in c.frame.columns]
    fig, axes = new_figure(1, 2 if spurious else 1)
    ax = axes[0][0]
    _draw(ax, [c for c in group if column in c.frame.columns], "epoch", column, 1.0, palette)
    ax.set_ylabel("selected features (ratio)" if column == "selection_ratio" else column)
    ax.set_title(f"{name}: features kept per epoch")
    if spurious:
        right = axes[0][1]
        _draw(right, spurious, "epoch", "spurious_removed", 1.0, palette)
        right.set_ylabel("spurious features removed (share)")
        right.set_title(f"{name}: spurious features removed")
    for axis in axes[0]:
        axis.set_xlabel("epoch")
        axis.legend(fontsize="small", title=legend or None)
    return Drawn(files=[save(fig, out_dir / f"features_vs_epoch_{slug(name)}.png")])


def _draw(ax: Any, curves: list[Curve], x: str, y: str, scale: float, palette: Palette) -> None:
    """Thin line per curve and a thick epoch-wise mean per table column."""
    by_col: dict[tuple[Any, ...], list[Curve]] = {}
    for curve in curves:
        by_col.setdefault(curve.col, []).append(curve)
    for col in sorted(by_col, key=lambda k: list(palette).index(k)):
        members, colour = by_col[col], palette[col]
        for curve in members:
            ax.plot(curve.frame[x], curve.frame[y] * scale, color=colour, alpha=0.3, lw=0.8)
        mean = _epoch_mean(members, [x, y])
        ax.plot(
            mean[x], mean[y] * scale, color=colour, lw=2.2, label=f"{label(col)} (n={len(members)})"
        )
    ax.grid(alpha=0.3)


def _epoch_mean(curves: list[Curve], columns: list[str]) -> pd.DataFrame:
    frames = []
    for curve in curves:
        frame = curve.frame
        epoch = frame["epoch"] if "epoch" in frame.columns else pd.Series(range(len(frame)))
        frames.append(pd.DataFrame({"_epoch": epoch.to_numpy(), **{c: frame[c] for c in columns}}))
    merged = pd.concat(frames, ignore_index=True)
    return merged.groupby("_epoch", sort=True)[columns].mean()


def _first_present(group: list[Curve], columns: tuple[str, ...]) -> str | None:
    for column in columns:
        if any(column in c.frame.columns for c in group):
            return column
    return None
