"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from vflfs.datasets import clear_dataset_cache

from helpers import DATA_DIR


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA_DIR / "madelon.npz").exists():
        pytest.fail(
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
