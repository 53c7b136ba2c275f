"""Reports over many run folders: one table like the papers', plots, published figures.

``vflfs report <root>`` collects every completed run under ``<root>`` (:mod:`.collect`),
filters them (:mod:`.filters`), pivots them into ``report.csv`` and ``report.md``
(:mod:`.table`, :mod:`.markdown`) beside published figures (:mod:`.published`), and draws the
curves, the regularisation path and per-party importance (:mod:`.plots`, :mod:`.path_plots`,
:mod:`.importance_plots`); runs' ``warnings`` are listed (:mod:`.run_warnings`).
"""

from vflfs.report.build import Report, ReportOptions, build_report
from vflfs.report.collect import Runs, Skipped, collect_runs
from vflfs.report.errors import ReportError

__all__ = [
    "Report",
    "ReportError",
    "ReportOptions",
    "Runs",
    "Skipped",
    "build_report",
    "collect_runs",
]
