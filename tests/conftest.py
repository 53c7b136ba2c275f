"""Shared fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from proc_utils import usable_cores

from vflfs.datasets import clear_dataset_cache

import deployment_stack
from helpers import DATA_DIR

MAX_WORKERS = 4  # each worker imports torch and Flower, and many tests start processes of their own


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many workers ``-n auto`` (pyproject's addopts) starts: one per core, up to
    ``MAX_WORKERS``, where ``-m`` leaves out the heavy and extended scenarios (the default);
    else none, every test in this process: those scenarios start Flower's engines (a SuperLink,
    SuperNodes, Ray), which take the cores themselves, and the deployment ones share one stack
    for the session. None on one core. xdist's own ``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides
    it."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    markexpr = config.getoption("markexpr") or ""
    if not all(f"not {marker}" in markexpr for marker in ("heavy", "extended")):
        return 0
    workers = min(usable_cores(), MAX_WORKERS)
    return workers if workers > 1 else 0  # on one core, no worker processes to start


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA_DIR / "madelon.npz").exists():
        pytest.skip(
            f"benchmark data not found in {DATA_DIR}; run `vflfs data fetch all` or set "
            "VFLFS_DATA_DIR to the folder holding them"
        )
    return DATA_DIR


@pytest.fixture
def fresh_dataset_cache():
    """An empty dataset cache before and after the test."""
    clear_dataset_cache()
    yield
    clear_dataset_cache()


@pytest.fixture(scope="session")
def party_files(tmp_path_factory) -> dict:
    """The deployment stack's party files and labels file (``split.json``'s content)."""
    return deployment_stack.write_party_files(tmp_path_factory.mktemp("party-files"))


@pytest.fixture(scope="session")
def deployment(tmp_path_factory, party_files):
    """One TLS SuperLink and its two registered SuperNodes for every test of the session that
    runs on Flower's deployment engine (started at the first such test, stopped at the end)."""
    with deployment_stack.start_deployment(tmp_path_factory.mktemp("deploy"), party_files) as stack:
        yield stack
