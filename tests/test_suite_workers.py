"""The suite's own runner: pyproject's ``-n auto`` starts workers for the default selection
only; a selection of the heavy scenarios runs in one process (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from proc_utils import REPO, usable_cores

ONE_TEST = "tests/test_settings.py::test_the_path_defaults_are_the_schemas"


def run_pytest(*args: str) -> str:
    """pytest's output for ``ONE_TEST`` with ``args``, run as the README runs the suite."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_AUTO_NUM_WORKERS"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", ONE_TEST, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(usable_cores() < 2, reason="workers start on 2 cores or more")
def test_the_default_selection_runs_on_workers():
    assert re.search(r"created: \d+/\d+ workers", run_pytest())


@pytest.mark.parametrize("marks", ["heavy or not heavy", "not extended"])
def test_a_selection_with_heavy_scenarios_runs_in_one_process(marks):
    out = run_pytest("-m", marks)
    assert "workers" not in out and " passed" in out
