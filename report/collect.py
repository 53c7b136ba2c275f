"""Find the run folders under a root and load their ``results.json`` into one table.

A run folder is any folder holding ``results.json`` (Hydra sweeps nest jobs in sub-folders).
Folders that look like runs but did not complete (``error.txt``, or ``config.yaml`` /
``history.csv`` without ``results.json``, or a status other than ``completed``) are skipped
and listed with the reason. A run with ``folds`` (cross-validation) gives one row per fold.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import pandas as pd

from vflfs.report.flatten import flatten
from vflfs.runtime.results import CONFIG, ERROR, HISTORY, RESULTS

# Files any run folder holds once it started; hidden folders (Hydra's ``.hydra``) are not runs.
MARKERS = (RESULTS, ERROR, HISTORY, CONFIG)
# A dataset's parameters, and those that describe its data rather than make it (the known
# relevant columns): runs that differ only in these are on the same dataset.
PARAMS = "config.dataset.params."
NOT_DATA = ("relevant",)
# Per-run lists that do not fit a flat row (plots read them from ``Runs.results``).
SKIP_KEYS = ("folds", "importance", "parties", "path", "step_losses")
# Keys a fold reports for itself: a CV run's own value (e.g. a mean) must not leak into a fold.
PER_FOLD_KEYS = (
    "test_metric",
    "val_metric",
    "train_metric",
    "final_test_metric",
    "best_epoch",
    "epochs_run",
    "selection",
    "communication",
    "wall_time_s",
)


@dataclass(frozen=True)
class Skipped:
    """A folder that looks like a run but is not a completed one."""

    run_dir: Path
    reason: str


@dataclass
class Runs:
    """Completed runs: ``table`` (one row per run or fold), raw results, skipped folders."""

    root: Path
    table: pd.DataFrame
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # run_dir -> results.json
    skipped: list[Skipped] = field(default_factory=list)

    def skipped_summary(self) -> list[str]:
        """One line per skipped folder: its path under the root and the reason."""
        return [f"{_relative(s.run_dir, self.root)}: {s.reason}" for s in self.skipped]


def find_run_dirs(root: Path) -> list[Path]:
    """Every non-hidden folder under ``root`` (itself included) holding a run file."""
    found = {p.parent for name in MARKERS for p in root.rglob(name) if p.is_file()}
    return sorted(d for d in found if not _hidden(d, root))


def collect_runs(root: str | Path) -> Runs:
    """Load every completed run under ``root``; the rest are listed in ``Runs.skipped``."""
    root = Path(root).expanduser().absolute()
    rows: list[dict[str, Any]] = []
    results: dict[str, dict[str, Any]] = {}
    skipped: list[Skipped] = []
    for run_dir in find_run_dirs(root):
        loaded = read_results(run_dir)
        if isinstance(loaded, str):
            skipped.append(Skipped(run_dir, loaded))
            continue
        results[str(run_dir)] = loaded
        rows.extend(run_rows(loaded, run_dir, _relative(run_dir, root)))
    table = label_datasets(pd.DataFrame(rows))
    return Runs(root=root, table=table, results=results, skipped=skipped)


def label_datasets(table: pd.DataFrame) -> pd.DataFrame:
    """Runs of one dataset name on different data (two ``.npz`` files, two teacher shapes) get
    the parameters that tell them apart in their ``dataset`` label, e.g. ``npz (path=a.npz)``,
    so that a table row is one dataset, never two averaged together (``config.dataset.name``
    keeps the bare name)."""
    if table.empty or "dataset" not in table:
        return table
    params = [
        c for c in table.columns if c.startswith(PARAMS) and c.rsplit(".", 1)[-1] not in NOT_DATA
    ]
    labels = table["dataset"].astype(str)
    for name, rows in table.groupby(labels, sort=False):
        differ = [c for c in params if rows[c].astype(str).nunique() > 1]
        if differ:
            labels.loc[rows.index] = [
                _label(name, differ, r) for r in rows[differ].itertuples(index=False)
            ]
    return table.assign(dataset=labels)


def _label(name: str, columns: list[str], values: tuple) -> str:
    """``name (param=value, ...)`` for the parameters ``columns`` take ``values``."""
    given = (f"{c[len(PARAMS) :]}={_short(v)}" for c, v in zip(columns, values, strict=True))
    return f"{name} ({', '.join(given)})"


def _short(value: Any) -> Any:
    """A parameter as a label shows it: a file by its name (no folders), a missing one as -."""
    if isinstance(value, str) and ("/" in value or "\\" in value):
        return PurePath(value).name
    return "-" if pd.isna(value) else value


def read_results(run_dir: Path) -> dict[str, Any] | str:
    """A completed run's results, or why the folder is skipped."""
    path = run_dir / RESULTS
    if not path.exists():
        error = run_dir / ERROR
        if error.exists():
            lines = error.read_text(errors="replace").strip().splitlines()
            return f"failed: {lines[0] if lines else 'error.txt is empty'}"
        return "incomplete: no results.json (still running or interrupted)"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        return f"unreadable results.json ({type(error).__name__}: {error})"
    if not isinstance(data, dict):
        return "unreadable results.json (not a JSON object)"
    if data.get("status") != "completed":
        return f"status {data.get('status')!r} (not 'completed')"
    return data


def run_rows(results: dict[str, Any], run_dir: Path, run: str) -> list[dict[str, Any]]:
    """The table rows of one run: itself (fold 0), or one row per entry of ``folds``."""
    ids = {"run": run, "run_dir": str(run_dir)}
    base = {k: v for k, v in results.items() if k not in SKIP_KEYS}
    folds = results.get("folds")
    if not isinstance(folds, list) or not folds:
        return [{**flatten(base), "fold": 0, **ids}]
    shared = flatten({k: v for k, v in base.items() if k not in PER_FOLD_KEYS})
    return [{**shared, "fold": i, **_fold_flat(fold), **ids} for i, fold in enumerate(folds)]


def _fold_flat(fold: Any) -> dict[str, Any]:
    if not isinstance(fold, dict):
        return {}
    return flatten({k: v for k, v in fold.items() if k not in SKIP_KEYS})


def iter_folds(results: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(fold, dict) for each fold of a run; a run without ``folds`` is fold 0, itself."""
    folds = results.get("folds")
    if not isinstance(folds, list) or not folds:
        yield 0, results
        return
    for i, fold in enumerate(folds):
        if isinstance(fold, dict):
            yield int(fold.get("fold", i)), fold


def _hidden(run_dir: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in run_dir.relative_to(root).parts)


def _relative(run_dir: Path, root: Path) -> str:
    rel = run_dir.relative_to(root).as_posix()
    return "." if rel in ("", ".") else rel
