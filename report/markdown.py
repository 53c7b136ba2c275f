"""The pivot as a markdown table: cells like ``98.9 ± 0.3 / 0.05``, published columns beside.

A cell holding runs (folds) that carry warnings ends in ``⚠`` and their count.

A published column (``fedsdg_fs (paper)``) follows our column of the same strategy; published
columns without one of ours (or without a vflfs equivalent, e.g. ``VFLFS (paper)``) come last.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from vflfs.report.formatting import (
    MISSING,
    PERCENT_METRICS,
    format_stat,
    is_metric_column,
    metric_label,
)
from vflfs.report.table import OURS, WARNED, PivotSpec, order_key

WARNING_MARK = "⚠"  # a cell holding runs with warnings: the mark and how many


def cell_text(record: dict[str, Any], spec: PivotSpec) -> str:
    """The cell of one ``aggregate`` / ``published_cells`` line: values joined by `` / ``."""
    note = record.get("note")
    if isinstance(note, str) and note:
        return note
    metric = record.get("metric") or None
    parts = []
    for value in spec.values:
        n = record.get(f"{value}.n")
        n = 1 if n is None or (isinstance(n, float) and math.isnan(n)) else int(n)
        mean, std = record.get(f"{value}.mean"), record.get(f"{value}.std")
        parts.append(format_stat(value, _num(mean), _num(std), n, metric) if n else MISSING)
    warned = _num(record.get(WARNED))
    return " / ".join(parts) + (f" {WARNING_MARK}{int(warned)}" if warned > 0 else "")


def cell_caption(cells: pd.DataFrame, spec: PivotSpec) -> str:
    """What a cell holds, e.g. ``test_metric (accuracy %) / selection.ratio``."""
    metrics = sorted({str(m) for m in cells.get("metric", pd.Series(dtype=str)) if m})
    if len(metrics) == 1:
        return " / ".join(metric_label(v, metrics[0]) for v in spec.values)
    shown = [f"{m} %" if m in PERCENT_METRICS else m for m in metrics]
    return " / ".join(
        f"{v} ({'; '.join(shown)})" if metrics and is_metric_column(v) else v for v in spec.values
    )


def render_table(cells: pd.DataFrame, spec: PivotSpec, labels: dict[str, str]) -> str:
    """The markdown table of ``cells``; ``labels`` maps a published ``source`` to its label."""
    ours = cells[cells["source"] == OURS]
    row_keys = _unique(ours, spec.rows)
    headers = [_join(k) for k in _unique(ours, spec.cols)]
    texts = {
        (_join(_key(r, spec.rows)), _join(_key(r, spec.cols))): cell_text(r, spec)
        for r in ours.to_dict("records")
    }
    placed: dict[str, str] = {}  # published header -> its strategy
    for record in cells[cells["source"] != OURS].to_dict("records"):
        header = f"{record['strategy']} ({labels.get(record['source'], record['source'])})"
        placed.setdefault(header, str(record["strategy"]))
        texts[(_text(record["dataset"]), header)] = cell_text(record, spec)
    order = _interleave(headers, placed)
    corner = f"{', '.join(spec.rows)} \\ {', '.join(spec.cols)}"
    lines = [_line([corner, *order]), _line(["---"] * (len(order) + 1))]
    for row in row_keys:
        name = _join(row)
        lines.append(_line([name, *(texts.get((name, h), "") for h in order)]))
    return "\n".join(lines)


def _interleave(headers: list[str], published: dict[str, str]) -> list[str]:
    order: list[str] = []
    for header in headers:
        order.append(header)
        order.extend(h for h, strategy in published.items() if strategy == header)
    order.extend(h for h, strategy in published.items() if strategy not in headers)
    return order


def _unique(cells: pd.DataFrame, columns: list[str]) -> list[tuple[Any, ...]]:
    keys = dict.fromkeys(_key(r, columns) for r in cells.to_dict("records"))
    return sorted(keys, key=lambda k: tuple(order_key(v) for v in k))


def _key(record: dict[str, Any], columns: list[str]) -> tuple[Any, ...]:
    return tuple(record.get(c) for c in columns)


def _join(key: tuple[Any, ...]) -> str:
    return ", ".join(_text(v) for v in key)


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
