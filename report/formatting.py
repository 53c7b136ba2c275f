"""Numbers as the papers print them: accuracy in % with one decimal, ratios with two.

A cell is ``mean ± std`` per value column, joined by `` / `` (``98.9 ± 0.3 / 0.05``). The
``± std`` part appears only when the cell holds more than one value and they differ (a std of
exactly 0, e.g. the all-features ratio 1.00 of every seed, is left out).
"""

from __future__ import annotations

import math

PERCENT_METRICS = ("accuracy",)
# Shares in [0, 1] printed with two decimals.
RATIO_COLUMNS = (
    "selection.ratio",
    "selection.precision",
    "selection.recall",
    "selection.spurious_removed",
    "selection_ratio",
    "spurious_removed",
)
MISSING = "–"


def is_metric_column(column: str) -> bool:
    """Whether ``column`` holds the run's score (``test_metric``, ``fold.val_metric``, ...)."""
    return column.rsplit(".", 1)[-1].endswith("metric")


def in_percent(column: str, metric: str | None) -> bool:
    """Whether ``column`` is a score shown in % (the run's metric is accuracy)."""
    return is_metric_column(column) and metric in PERCENT_METRICS


def format_number(column: str, value: float | None, metric: str | None) -> str:
    """One number of ``column`` (see the module docstring); ``–`` for a missing one."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    value = float(value)
    if in_percent(column, metric):
        return f"{100 * value:.1f}"
    if is_metric_column(column):
        return f"{value:.3f}"
    if column in RATIO_COLUMNS:
        return f"{value:.2f}"
    return _general(value)


def format_stat(column: str, mean: float, std: float, n: int, metric: str | None) -> str:
    """``mean ± std`` (``± std`` only for n > 1 and std > 0)."""
    text = format_number(column, mean, metric)
    if n > 1 and not math.isnan(std) and std > 0:
        text += f" ± {format_number(column, std, metric)}"
    return text


def metric_label(column: str, metric: str | None) -> str:
    """``test_metric (accuracy %)``, ``test_metric (r2)``, or the column name."""
    if in_percent(column, metric):
        return f"{column} ({metric} %)"
    if is_metric_column(column) and metric:
        return f"{column} ({metric})"
    return column


def _general(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"
