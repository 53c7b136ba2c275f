"""Communication cost to reach a target (LESS-VFL's Table 2 criterion; spec section 7).

Castiglia et al. 2023, "LESS-VFL: Communication-Efficient Feature Selection for Vertical
Federated Learning", ICML, Section 5: the MB communicated until the test accuracy is at least
0.9 x the best accuracy of VFL (original: all features, no spurious ones) while at least 80%
of the spurious features are removed.

Pure functions over per-epoch history rows (``history.csv`` as read by :mod:`csv` or pandas:
columns ``epoch``, ``test_metric``, ``spurious_removed`` and a cost column, ``mb`` = every byte
carried in Flower messages so far, or ``analytic_mb`` = the paper's count of uploaded
training-row embedding floats x 32 bits).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

FRACTION = 0.9  # of the reference accuracy
MIN_REMOVED = 0.8  # share of the spurious features removed

Rows = Sequence[Mapping[str, Any]] | Any  # list of dicts, or a pandas DataFrame


def _rows(history: Rows) -> list[Mapping[str, Any]]:
    if hasattr(history, "to_dict"):
        return history.to_dict("records")
    return list(history)


def _number(value: Any) -> float:
    """A float from a CSV cell or a number; NaN for empty or missing."""
    if value is None or value == "":
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def reference_metric(histories: Iterable[Rows], metric: str = "test_metric") -> float:
    """The best ``metric`` reached at any epoch of any of the reference runs (the paper's
    target base: the maximum accuracy reached by VFL (original))."""
    values = [_number(r.get(metric)) for h in histories for r in _rows(h)]
    values = [v for v in values if not math.isnan(v)]
    if not values:
        raise ValueError(f"no {metric!r} value in the reference histories")
    return max(values)


def cost_to_target(
    history: Rows,
    reference: float,
    *,
    fraction: float = FRACTION,
    min_removed: float | None = MIN_REMOVED,
    cost: str = "mb",
    metric: str = "test_metric",
) -> float | None:
    """The ``cost`` of the first epoch whose ``metric`` >= ``fraction`` x ``reference`` and
    whose ``spurious_removed`` >= ``min_removed``; None if no epoch gets there.

    A run without a ``spurious_removed`` value never meets the removal criterion, unless
    ``min_removed`` is None (accuracy only).
    """
    target = fraction * reference
    rows = sorted(_rows(history), key=lambda r: _number(r.get("epoch")))
    for row in rows:
        removed = _number(row.get("spurious_removed"))
        if _number(row.get(metric)) < target:
            continue
        if min_removed is not None and not removed >= min_removed:
            continue
        return _number(row.get(cost))
    return None


def summarize_costs(costs: Sequence[float | None]) -> dict:
    """Mean and standard deviation over the runs that reached the target, and how many did."""
    reached = [c for c in costs if c is not None]
    n = len(reached)
    mean = sum(reached) / n if n else math.nan
    std = math.sqrt(sum((c - mean) ** 2 for c in reached) / (n - 1)) if n > 1 else math.nan
    return {"mean": mean, "std": std, "reached": n, "runs": len(costs)}


def format_cost(summary: Mapping[str, Any], digits: int = 1) -> str:
    """``"12.3 +- 0.4"``; ``"n/r"`` when no run reached the target; ``(k/n)`` when only some."""
    if not summary["reached"]:
        return "n/r"
    text = f"{summary['mean']:.{digits}f}"
    if not math.isnan(summary["std"]):
        text += f" ± {summary['std']:.{digits}f}"
    if summary["reached"] < summary["runs"]:
        text += f" ({summary['reached']}/{summary['runs']})"
    return text
