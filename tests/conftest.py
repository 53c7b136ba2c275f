"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from vflfs.datasets import clear_dataset_cache

import deployment_stack
from helpers import DATA_DIR


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
