"""benchmarks/scaling.py: its smallest point in engine=local, and the points it skips."""

from __future__ import annotations

import csv

import pytest

from benchmarks.scaling import COLUMNS, main, parser, plan
from benchmarks.scaling_plots import plot_all

MEASURED = (
    "steps_per_s", "s_per_epoch", "mb_per_epoch", "server_rss_mb", "party_rss_mb",
    "party_traced_mb", "train_s", "eval_s", "setup_s", "point_wall_s",
)  # fmt: skip


@pytest.mark.extended  # a fresh process importing torch and Flower: about a minute
def test_a_local_point_in_its_own_process_writes_positive_measurements(tmp_path):
    argv = ["--engines", "local", "--parties", "2", "--rows", "2000", "--cols", "10"]
    rows = main([*argv, "--steps", "4", "--no-plots", "--out", str(tmp_path)])
    assert [r["status"] for r in rows] == ["completed"]
    with (tmp_path / "scaling.csv").open() as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        (row,) = list(reader)
    assert all(float(row[k]) > 0 for k in MEASURED), row
    # 1280 training rows in batches of 128: 10 steps, 4 measured, the epoch extrapolated
    assert (row["steps_per_epoch"], row["steps_measured"], row["extrapolated"]) == (
        "10",
        "4",
        "True",
    )
    assert float(row["epoch_x"]) == 1.0
    assert row["note"] == "extrapolated from 4 steps (stopped by --steps)"
    assert float(row["server_rss_mb"]) >= float(row["party_traced_mb"])  # one process
    assert len(plot_all(rows, tmp_path)) == 3
    assert all((tmp_path / f"scaling_{n}.png").stat().st_size > 0 for n in ("rows", "memory"))


def test_a_matrix_over_the_memory_budget_is_skipped_with_its_size():
    args = parser().parse_args(["--parties", "2", "16", "--rows", "1000000", "--cols", "10000"])
    reasons = {(p.engine, p.parties): reason for p, reason in plan(args)}
    assert len(reasons) == 4
    assert "1000000 x 160000 float32 = 596.0 GiB" in reasons[("local", 16)]
    assert all("over --max-data-gib 0.75" in r for r in reasons.values())
