"""``vflfs report <root>``: the papers' table, plots and published figures over many runs.

vflfs report outputs/ --rows dataset --cols strategy --values test_metric selection.ratio
vflfs report sweep/ --where '`selection.spurious_removed` >= 0.8' \\
    --best-by train_metric --group dataset,strategy
vflfs report sweep/ --published fedsdg_table3 heldout_reference --out /tmp/report

``vflfs report ...`` reaches :func:`main` through the ``vflfs`` command (:mod:`vflfs.cli`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vflfs.report.build import ReportOptions, build_report
from vflfs.report.errors import ReportError
from vflfs.report.published import PUBLISHED
from vflfs.report.table import PivotSpec


def report_parser(prog: str = "vflfs report") -> argparse.ArgumentParser:
    """The options of ``vflfs report``."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Tabulate and plot every completed run (results.json) under ROOT.",
    )
    p.add_argument("root", type=Path, help="folder searched recursively for run folders")
    p.add_argument("--rows", nargs="+", default=["dataset"], help="row columns (default dataset)")
    p.add_argument("--cols", nargs="+", default=["strategy"], help="column columns (strategy)")
    p.add_argument(
        "--values",
        nargs="+",
        default=["test_metric", "selection.ratio"],
        help="what a cell shows, joined by ' / ' (default test_metric selection.ratio)",
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        help="keep rows matching a DataFrame.query expression; quote dotted names with "
        "backticks: '`selection.spurious_removed` >= 0.8' (repeatable)",
    )
    p.add_argument(
        "--best-by",
        metavar="COL[:max|:min]",
        help="within each --group keep the setting (runs differing only by seed/fold) with "
        "the best mean COL (highest unless :min)",
    )
    p.add_argument("--group", nargs="+", help="columns of a --best-by group (default rows+cols)")
    p.add_argument(
        "--published",
        nargs="+",
        action="extend",
        default=[],
        choices=sorted(PUBLISHED),
        metavar="NAME",
        help=f"add published figures beside ours: {', '.join(sorted(PUBLISHED))}",
    )
    p.add_argument("--out", type=Path, help="output folder (default ROOT/report)")
    p.add_argument("--no-plots", action="store_true", help="write the table only")
    return p


def options_from(args: argparse.Namespace) -> ReportOptions:
    """:class:`ReportOptions` from parsed arguments (comma-separated lists accepted)."""
    spec = PivotSpec(rows=_names(args.rows), cols=_names(args.cols), values=_names(args.values))
    return ReportOptions(
        root=args.root,
        out=args.out,
        spec=spec,
        where=list(args.where),
        best_by=args.best_by,
        group=_names(args.group) if args.group else None,
        published=list(dict.fromkeys(args.published)),
        plots=not args.no_plots,
    )


def main(argv: list[str] | None = None) -> int:
    """Run ``vflfs report``; 0 on success, 2 (with the reason on stderr) on bad input."""
    args = report_parser().parse_args(argv)
    try:
        report = build_report(options_from(args))
    except ReportError as error:
        print(f"vflfs report: error: {error}", file=sys.stderr)
        return 2
    print(report.table)
    print()
    skipped = report.runs.skipped_summary()
    if skipped:
        print(f"skipped {len(skipped)} folder(s):")
        print("".join(f"  {line}\n" for line in skipped), end="")
    for warning in report.warnings:
        print(f"warning: {warning.line()}")
    for message in report.messages:
        print(f"note: {message}")
    print("wrote:")
    print("".join(f"  {path}\n" for path in report.files), end="")
    return 0


def _names(values: list[str]) -> list[str]:
    return [name for value in values for name in value.split(",") if name]


if __name__ == "__main__":
    sys.exit(main())
