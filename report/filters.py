"""Row filters: ``--where`` expressions and ``--best-by`` (a hyper-parameter search).

``--best-by COL --group A,B`` keeps, within each group, the *setting* with the best mean
``COL``: a setting is the runs that differ only in seed or fold (all ``config.*`` columns equal
except those in :data:`NOT_SETTING`), so every seed and fold of the winner is kept and the cell
reports its mean ± std. LESS-VFL's search is
``--where '`selection.spurious_removed` >= 0.8' --best-by train_metric
--group dataset,strategy``.
Put ``seed`` in the group to pick the best setting per seed instead.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import pandas as pd

from vflfs.report.errors import ReportError

# Config columns that vary between repeats of one setting or do not change the model.
NOT_SETTING = ("config.seed", "config.output_dir", "config.device", "config.threads")
NOT_SETTING_PREFIXES = ("config.federation.", "config.simulation.", "config.dataset.data_dir")


@dataclass(frozen=True)
class BestBy:
    """The column to optimise and its direction (``COL`` or ``COL:max``; ``COL:min``)."""

    column: str
    maximize: bool = True

    @classmethod
    def parse(cls, text: str) -> BestBy:
        column, _, direction = text.rpartition(":") if ":" in text else (text, "", "max")
        if direction not in ("max", "min"):
            raise ReportError(f"--best-by {text!r}: the direction after ':' must be max or min")
        return cls(column=column, maximize=direction == "max")


def require_columns(table: pd.DataFrame, names: list[str], option: str) -> None:
    """Fail with the close matches when ``names`` are not all columns of ``table``."""
    for name in names:
        if name in table.columns:
            continue
        close = difflib.get_close_matches(name, [str(c) for c in table.columns], n=5, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ReportError(f"{option}: no column {name!r} in the runs{hint}")


def apply_where(table: pd.DataFrame, expressions: list[str]) -> pd.DataFrame:
    """Keep the rows matching every expression (``DataFrame.query`` syntax)."""
    for expression in expressions:
        try:
            table = table.query(expression)
        except Exception as error:  # query raises many types for a bad expression
            raise ReportError(
                f"--where {expression!r}: {type(error).__name__}: {error} (quote dotted "
                "names with backticks, e.g. `selection.ratio` < 0.5)"
            ) from error
    return table


def setting_columns(table: pd.DataFrame, group: list[str]) -> list[str]:
    """The ``config.*`` columns that identify a setting (see :data:`NOT_SETTING`)."""
    return [
        str(c)
        for c in table.columns
        if str(c).startswith("config.")
        and c not in NOT_SETTING
        and not str(c).startswith(NOT_SETTING_PREFIXES)
        and c not in group
    ]


def keep_best(table: pd.DataFrame, best: BestBy, group: list[str]) -> pd.DataFrame:
    """Within each ``group``, the rows of the setting with the best mean ``best.column``."""
    require_columns(table, [best.column], "--best-by")
    require_columns(table, group, "--group")
    if table.empty:
        return table
    settings = setting_columns(table, group) or ["run_dir"]
    work = pd.DataFrame(
        {
            "_group": _key(table, group),
            "_setting": _key(table, settings),
            "_value": pd.to_numeric(table[best.column], errors="coerce"),
        },
        index=table.index,
    )
    means = work.groupby(["_group", "_setting"], sort=False)["_value"].mean()
    target = means.groupby(level="_group").transform("max" if best.maximize else "min")
    winners = set(means[(means == target) & means.notna()].index)
    keep = [pair in winners for pair in zip(work["_group"], work["_setting"], strict=True)]
    return table[keep]


def _key(table: pd.DataFrame, columns: list[str]) -> pd.Series:
    """One string per row identifying its values in ``columns`` (NaN-safe)."""
    if not columns:
        return pd.Series("", index=table.index)
    return table[columns].map(str).agg("\x1f".join, axis=1)
