"""benchmarks/path_cost.py: each run's ratio is to the dense run of its own repeat."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.path_cost import (
    REPO,
    markdown,
    reference_env,
    refit_spans,
    span_seconds,
    summarise,
)


def run(name: str, wall: float) -> dict:
    return {"name": name, "wall_s": wall, "cpu_s": wall, "epochs": 1, "test_metric": 0.5, "kept": 3}


def test_ratios_are_taken_within_a_repeat_then_the_median():
    repeats = [
        [run("dense", 10.0), run("stg", 30.0)],  # 3x
        [run("dense", 20.0), run("stg", 40.0)],  # 2x under another load
        [run("dense", 10.0), run("stg", 50.0)],  # 5x
    ]
    dense, stg = summarise(repeats)
    assert dense["x_dense"] == 1.0
    assert stg["x_dense"] == 3.0 and stg["x_dense_range"] == [2.0, 5.0]
    assert stg["wall_s"] == 40.0  # the median wall time, not the ratio's run
    assert "| stg | 40.0 | 40.0 | 3.0 (2.0-5.0) | 1 | 0 (0) | 0.0 | 0.0 |" in markdown(
        [dense, stg], "header"
    )


def test_the_refits_epochs_are_those_trained_after_the_path():
    """The path points' own models (ranking ``penalised``) trained no epoch of their own."""
    rows = [
        {"epochs": [48, 79]},
        {"epochs": [79, 158], "ranking": "path"},
        {"epochs": [30, 31], "ranking": "penalised"},
        {"epochs": [158, 179], "ranking": "screen"},
    ]
    results = {"extra": {"path_choice": {"refits": rows}}}
    assert refit_spans(results) == [(48, 79), (79, 158), (158, 179)]
    assert refit_spans({"extra": {}}) == []  # a run without a path


def test_a_spans_seconds_run_from_the_end_of_the_epoch_before_it():
    ends = [1.0, 2.0, 4.0, 7.0, 11.0]  # wall_s at the end of epochs 0-4
    assert span_seconds(ends, [(2, 4)]) == 5.0  # epochs 2 and 3: from 2.0 to 7.0
    assert span_seconds(ends, [(0, 1), (4, 5)]) == 1.0 + 4.0
    assert span_seconds(ends, []) == 0.0


def test_a_reference_commits_dense_run_gets_a_ratio_of_its_own():
    repeats = [
        [run("dense", 10.0), run("dense@old", 20.0), run("stg", 30.0)],
        [run("dense", 10.0), run("dense@old", 10.0), run("stg", 40.0)],
    ]
    dense, old, stg = summarise(repeats, reference=1)
    assert stg["x_dense"] == 3.5 and stg["x_reference"] == 2.75
    assert stg["x_reference_range"] == [1.5, 4.0] and old["x_reference"] == 1.0
    table = markdown([dense, old, stg], "header")
    assert "| x the dense run (range) | x the reference's dense run (range) |" in table
    assert "| stg | 35.0 | 35.0 | 3.5 (3.0-4.0) | 2.75 (1.5-4.0) | 1 |" in table
    assert "reference" not in markdown(summarise(repeats), "header")


def test_the_reference_code_is_the_commits_files_imported_as_vflfs(tmp_path):
    """In a folder named by the commit's full hash, so that a name that moves (``HEAD``, a
    branch) never finds another commit's files."""
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    env = reference_env("HEAD", tmp_path)
    where = subprocess.run(
        [sys.executable, "-c", "import vflfs.benchmarks.path_cost as m; print(m.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where == str(tmp_path / head / "vflfs" / "benchmarks" / "path_cost.py")
    with pytest.raises(SystemExit, match="name a commit of this repository"):
        reference_env("no-such-commit", tmp_path / "other")
