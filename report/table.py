"""The report's pivot: one cell per (rows, columns) key, mean / std / n of each value column.

:func:`aggregate` gives the machine-readable cells (``report.csv``: one line per cell, columns
``<value>.mean``, ``<value>.std``, ``<value>.n`` in the runs' own units, accuracy as a
fraction, and ``warned``: how many of the cell's runs or folds carry warnings);
:func:`published_cells` adds a published table's figures as more cells, with ``source``
naming the table (ours are ``vflfs``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from vflfs.report.published import PublishedTable

OURS = "vflfs"
WARNED = "warned"  # a row is 1 where its run (fold) carries warnings; a cell counts them


@dataclass(frozen=True)
class PivotSpec:
    """Which columns make the table's rows and columns, and what a cell shows."""

    rows: list[str] = field(default_factory=lambda: ["dataset"])
    cols: list[str] = field(default_factory=lambda: ["strategy"])
    values: list[str] = field(default_factory=lambda: ["test_metric", "selection.ratio"])

    @property
    def keys(self) -> list[str]:
        return [*self.rows, *self.cols]


def aggregate(table: pd.DataFrame, spec: PivotSpec) -> pd.DataFrame:
    """One line per cell: the key columns, ``source``, ``metric`` and the value statistics."""
    records: list[dict[str, Any]] = []
    for key, group in table.groupby(spec.keys, dropna=False, sort=False):
        record: dict[str, Any] = dict(zip(spec.keys, key, strict=True))
        record.update(source=OURS, metric=_metric(group))
        for value in spec.values:
            numbers = pd.to_numeric(group[value], errors="coerce").dropna()
            record[f"{value}.mean"] = float(numbers.mean()) if len(numbers) else math.nan
            record[f"{value}.std"] = float(numbers.std()) if len(numbers) > 1 else math.nan
            record[f"{value}.n"] = int(len(numbers))
        if WARNED in group.columns:
            record[WARNED] = int(group[WARNED].sum())
        records.append(record)
    records.sort(key=lambda r: tuple(order_key(r[k]) for k in spec.keys))
    return pd.DataFrame(records)


def published_cells(
    cells: pd.DataFrame, spec: PivotSpec, tables: Iterable[PublishedTable]
) -> tuple[pd.DataFrame, list[str]]:
    """The published figures for the datasets in ``cells``, and messages on what was left out."""
    tables = list(tables)
    if not tables:
        return pd.DataFrame(), []
    if spec.rows != ["dataset"] or spec.cols != ["strategy"]:
        names = ", ".join(t.key for t in tables)
        return pd.DataFrame(), [
            f"published figures ({names}) need --rows dataset --cols strategy; left out"
        ]
    records: list[dict[str, Any]] = []
    for dataset in dict.fromkeys(cells["dataset"]):
        for table in tables:
            records.extend(_published_records(str(dataset), table, spec))
    messages = [] if records else ["no published figures for these datasets"]
    return pd.DataFrame(records), messages


def _published_records(
    dataset: str, table: PublishedTable, spec: PivotSpec
) -> list[dict[str, Any]]:
    records = []
    for column in table.columns:
        figures = table.lookup(dataset, column.name)
        if figures is None or not any(v in figures for v in spec.values):
            continue
        record: dict[str, Any] = {
            "dataset": dataset,
            "strategy": column.strategy or column.name,
            "source": table.key,
            "metric": table.metric,
            "published_column": column.name,
            "note": table.notes.get((dataset.upper(), column.name), ""),
        }
        for value in spec.values:
            record[f"{value}.mean"] = figures.get(value, math.nan)
            record[f"{value}.std"] = math.nan
            record[f"{value}.n"] = math.nan
        records.append(record)
    return records


def order_key(value: Any) -> tuple[int, float, str]:
    """Sort key for mixed cell keys: numbers by value first, then text, missing last."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return (2, 0.0, "")
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def _metric(group: pd.DataFrame) -> str:
    if "metric" not in group.columns:
        return ""
    metrics = sorted({str(m) for m in group["metric"].dropna()})
    return metrics[0] if len(metrics) == 1 else "mixed" if metrics else ""
