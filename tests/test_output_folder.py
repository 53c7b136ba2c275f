"""The output folder tells the truth: stale outcome files go, permissions follow the umask,
and a completed run of another configuration is recognised."""

from __future__ import annotations

import json
import os
import stat

import pytest

from vflfs.runtime.output_folder import OutputFolderError, differences, holds_same_run
from vflfs.runtime.results import write_atomic

from helpers import run_local, tiny_config


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask():
    """Set a umask for the test, restoring the previous one after it."""
    previous = os.umask(0o022)
    yield os.umask
    os.umask(previous)


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_files_follow_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    write_atomic(tmp_path / "a.txt", "x")
    assert mode(tmp_path / "a.txt") == expected
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]  # no temporary file left


def test_a_run_replaces_stale_outcome_files(tmp_path, umask):
    out = tmp_path / "out"
    out.mkdir()
    (out / "error.txt").write_text("ValueError: from an earlier run\n")
    (out / "results.json").write_text(json.dumps({"status": "completed", "test_metric": 0.1}))
    # A failing run leaves only its own error, not the earlier results.
    with pytest.raises(ValueError, match="add up"):
        run_local(tiny_config("split=sizes split.sizes=[10,10]"), out)
    assert not (out / "results.json").exists()
    assert "add up" in (out / "error.txt").read_text()
    # A completed run leaves no earlier error beside its results, which any reader may read.
    run_local(tiny_config("training.epochs=1"), out)
    assert not (out / "error.txt").exists()
    assert json.loads((out / "results.json").read_text())["epochs_run"] == 1
    assert {p.name: mode(p) for p in out.iterdir()} == dict.fromkeys(
        ["config.yaml", "history.csv", "results.json"], 0o644
    )


def test_completed_runs_are_told_apart_by_configuration(tmp_path):
    cfg = tiny_config("training.epochs=1")
    assert holds_same_run(tmp_path, cfg) is False  # nothing there yet
    run_local(cfg, tmp_path)
    assert holds_same_run(tmp_path, cfg) is True
    # rerun, resume, output_dir and engine do not change what a run computes.
    assert holds_same_run(
        tmp_path, tiny_config("training.epochs=1 rerun=true resume=true engine=simulation")
    )
    with pytest.raises(OutputFolderError, match=r"training\.epochs differ.*rerun=true"):
        holds_same_run(tmp_path, tiny_config("training.epochs=2"))


def test_differences_name_nested_keys():
    old = {"a": {"b": 1, "c": [1, 2]}, "seed": 0, "rerun": False}
    new = {"a": {"b": 2, "c": [1, 2]}, "seed": 0, "rerun": True, "extra": 3}
    assert differences(old, new) == ["a.b", "extra"]
