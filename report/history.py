"""Per-epoch curves from ``history.csv``, grouped the way the report's table groups runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from vflfs.runtime.results import HISTORY

Key = tuple[object, ...]


@dataclass(frozen=True)
class Curve:
    """One run's (or one fold's) history, with the table cell it belongs to."""

    row: Key  # the table's row key (a figure per row)
    col: Key  # the table's column key (a line colour per column)
    run: str
    fold: int
    metric: str  # "accuracy" | "r2" | ...
    frame: pd.DataFrame


def load_history(run_dir: str | Path) -> pd.DataFrame | None:
    """``history.csv`` with a ``fold`` column (0 when the file has none); None if absent."""
    path = Path(run_dir) / HISTORY
    if not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError):
        return None
    if "fold" not in frame.columns:
        frame.insert(0, "fold", 0)
    return frame


def curves_for(table: pd.DataFrame, rows: list[str], cols: list[str]) -> list[Curve]:
    """A :class:`Curve` per (run, fold) row of ``table`` whose run has a ``history.csv``."""
    curves: list[Curve] = []
    for run_dir, runs in table.groupby("run_dir", sort=True):
        history = load_history(str(run_dir))
        if history is None:
            continue
        for record in runs.to_dict("records"):
            fold = int(record.get("fold", 0))
            frame = history[history["fold"] == fold]
            if frame.empty:
                continue
            curves.append(
                Curve(
                    row=tuple(record.get(c) for c in rows),
                    col=tuple(record.get(c) for c in cols),
                    run=str(record.get("run", run_dir)),
                    fold=fold,
                    metric=str(record.get("metric", "")),
                    frame=frame.reset_index(drop=True),
                )
            )
    return curves
