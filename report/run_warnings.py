"""The ``warnings`` runs record (``results.json``): a run that learned nothing, a selection
that cost accuracy. The report lists them, and marks the table cells holding such runs, so a
run like that is not hidden inside a mean."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from vflfs.report.collect import iter_folds
from vflfs.report.table import WARNED


@dataclass(frozen=True)
class RunWarning:
    """One warning of one run (or fold)."""

    run: str  # the run folder under the report's root
    fold: int | None  # None for a run without folds
    text: str

    def line(self) -> str:
        where = f"`{self.run}`" + (f" fold {self.fold}" if self.fold is not None else "")
        return f"{where}: {self.text}"


def run_warnings(table: pd.DataFrame, results: dict[str, dict]) -> list[RunWarning]:
    """The warnings of every (run, fold) of ``table``, in table order."""
    found: list[RunWarning] = []
    for record in table.drop_duplicates(["run_dir", "fold"]).to_dict("records"):
        texts, has_folds = _warnings(results.get(str(record["run_dir"]), {}), int(record["fold"]))
        fold = int(record["fold"]) if has_folds else None
        found.extend(RunWarning(str(record["run"]), fold, text) for text in texts)
    return found


def mark_warned(table: pd.DataFrame, results: dict[str, dict]) -> pd.DataFrame:
    """``table`` with :data:`WARNED` set on the rows (runs or folds) that carry warnings."""
    flags = [
        int(bool(_warnings(results.get(str(r["run_dir"]), {}), int(r["fold"]))[0]))
        for r in table[["run_dir", "fold"]].to_dict("records")
    ]
    return table.assign(**{WARNED: flags})


def _warnings(run: dict[str, Any], fold: int) -> tuple[list[str], bool]:
    """The warning texts of one fold of ``run`` (the run itself without folds), and whether
    the run has folds."""
    folds = dict(iter_folds(run))
    texts = folds.get(fold, {}).get("warnings")
    has_folds = isinstance(run.get("folds"), list) and bool(run["folds"])
    return ([str(t) for t in texts] if isinstance(texts, list) else []), has_folds
