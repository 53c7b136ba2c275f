"""A whole report: collect, filter, pivot, add published figures, write files and plots.

The output folder (default ``<root>/report``) receives ``report.csv`` (one line per cell,
numbers in the runs' units), ``report.md`` (the formatted table, what was skipped, the plots)
and the PNG figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from vflfs.report.collect import Runs, collect_runs
from vflfs.report.errors import ReportError
from vflfs.report.filters import BestBy, apply_where, keep_best, require_columns
from vflfs.report.markdown import WARNING_MARK, cell_caption, render_table
from vflfs.report.published import PublishedTable, published_table
from vflfs.report.run_warnings import RunWarning, mark_warned, run_warnings
from vflfs.report.table import OURS, PivotSpec, aggregate, published_cells


@dataclass
class ReportOptions:
    """Everything ``vflfs report`` accepts (see :mod:`vflfs.report.cli`)."""

    root: Path
    out: Path | None = None
    spec: PivotSpec = field(default_factory=PivotSpec)
    where: list[str] = field(default_factory=list)
    best_by: str | None = None
    group: list[str] | None = None  # default: the cell's identity (rows + columns)
    published: list[str] = field(default_factory=list)
    plots: bool = True


@dataclass
class Report:
    """The built report: its table, the cells behind it, and what was written."""

    runs: Runs
    used: pd.DataFrame  # the rows (runs or folds) left after the filters
    cells: pd.DataFrame  # report.csv
    table: str  # the markdown table with its caption
    files: list[Path] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    warnings: list[RunWarning] = field(default_factory=list)  # those of the used runs


def build_report(options: ReportOptions) -> Report:
    """Build and write the report described by ``options``; :class:`ReportError` on bad input."""
    runs = collect_runs(options.root)
    if runs.table.empty:
        skipped = "".join(f"\n  {line}" for line in runs.skipped_summary())
        raise ReportError(
            f"no completed run (results.json with status 'completed') under {runs.root}"
            + (f"; skipped {len(runs.skipped)} folder(s):{skipped}" if runs.skipped else "")
        )
    spec = options.spec
    require_columns(runs.table, spec.rows, "--rows")
    require_columns(runs.table, spec.cols, "--cols")
    require_columns(runs.table, spec.values, "--values")
    used = mark_warned(select_rows(runs.table, options), runs.results)
    tables = [published_table(name) for name in options.published]
    ours = aggregate(used, spec)
    theirs, messages = published_cells(ours, spec, tables)
    cells = pd.concat([ours, theirs], ignore_index=True) if not theirs.empty else ours
    table = f"Cell: {cell_caption(ours, spec)}\n\n{render_table(cells, spec, _labels(tables))}"
    report = Report(runs=runs, used=used, cells=cells, table=table, messages=messages)
    report.warnings = run_warnings(used, runs.results)
    _write(report, options, tables)
    return report


def select_rows(table: pd.DataFrame, options: ReportOptions) -> pd.DataFrame:
    """Apply ``--where`` then ``--best-by``; fail when no row is left."""
    used = apply_where(table, options.where)
    if options.best_by:
        group = options.group if options.group is not None else options.spec.keys
        used = keep_best(used, BestBy.parse(options.best_by), group)
    if used.empty:
        raise ReportError(
            f"no run left after the filters ({len(table)} rows before: "
            f"--where {options.where or '-'}, --best-by {options.best_by or '-'})"
        )
    return used


def _write(report: Report, options: ReportOptions, tables: list[PublishedTable]) -> None:
    out = (options.out or report.runs.root / "report").expanduser().absolute()
    out.mkdir(parents=True, exist_ok=True)
    report.cells.to_csv(out / "report.csv", index=False)
    report.files.append(out / "report.csv")
    if options.plots:
        from vflfs.report.history import curves_for
        from vflfs.report.importance_plots import plot_importance
        from vflfs.report.path_plots import plot_paths
        from vflfs.report.plots import plot_curves

        spec = options.spec
        curves = curves_for(report.used, spec.rows, spec.cols)
        legend = ", ".join(spec.cols)
        drawn = plot_curves(curves, out, legend=legend)
        drawn.extend(
            plot_paths(report.used, report.runs.results, out, spec.rows, spec.cols, legend)
        )
        drawn.extend(plot_importance(report.used, report.runs.results, out))
        report.files.extend(drawn.files)
        report.messages.extend(drawn.messages)
    (out / "report.md").write_text(compose_markdown(report, options, tables, out))
    report.files.insert(1, out / "report.md")


def compose_markdown(
    report: Report, options: ReportOptions, tables: list[PublishedTable], out: Path
) -> str:
    """``report.md``: provenance, the table, published sources, run warnings, skipped folders,
    plots."""
    runs, used = report.runs, report.used
    lines = [
        "# vflfs report",
        "",
        f"Runs under `{runs.root}`: {len(runs.results)} completed ({len(runs.table)} rows with "
        f"folds), {len(used)} rows used, {len(runs.skipped)} folder(s) skipped.",
    ]
    if options.where or options.best_by:
        lines.append(_filters_line(options))
    lines += ["", report.table, "", _n_line(report.cells, options.spec)]
    if tables:
        lines += ["", "Published figures:", "", *(f"- ({t.label}): {t.source}" for t in tables)]
    if report.warnings:
        count = f"{len(report.warnings)} warning(s) in the runs used"
        mark = f"the table marks their cells {WARNING_MARK} and the number of runs"
        lines += ["", "## Warnings", "", f"{count} ({mark}):", ""]
        lines += [f"- {w.line()}" for w in report.warnings]
    if runs.skipped:
        lines += ["", "## Skipped", "", *(f"- {s}" for s in runs.skipped_summary())]
    images = [f for f in report.files if f.suffix == ".png"]
    if images:
        lines += ["", "## Plots", ""]
        lines += [f"![{f.stem}]({f.relative_to(out).as_posix()})" for f in images]
    if report.messages:
        lines += ["", "## Notes", "", *(f"- {m}" for m in report.messages)]
    return "\n".join(lines) + "\n"


def _filters_line(options: ReportOptions) -> str:
    where = " and ".join(f"`` {w} ``" for w in options.where) or "-"
    text = f"Filters: where {where}"
    if options.best_by:
        group = options.group if options.group is not None else options.spec.keys
        text += f"; best setting by {options.best_by} within {', '.join(group)}"
    return text + "."


def _n_line(cells: pd.DataFrame, spec: PivotSpec) -> str:
    ours = cells[cells["source"] == OURS]
    counts = ours[f"{spec.values[0]}.n"].astype(int)
    span = f"{counts.min()}" if counts.min() == counts.max() else f"{counts.min()}-{counts.max()}"
    return (
        f"Mean ± std over the runs and folds of a cell (n = {span} per cell; std only where "
        "n > 1 and the values differ); per-cell mean, std and n in report.csv."
    )


def _labels(tables: list[PublishedTable]) -> dict[str, str]:
    return {t.key: t.label for t in tables}
