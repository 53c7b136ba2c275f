"""``vflfs data``: the data folder's default, its messages, and the loaders' use of the folder."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from vflfs.datasets import DATA_DIR_ENV, DataError, load_dataset
from vflfs.datasets.paths import default_data_dir
from vflfs.runtime.data_cli import main

from source_files import madelon_sources

pytestmark = pytest.mark.usefixtures("fresh_dataset_cache")


@pytest.fixture
def cache_home(monkeypatch, tmp_path):
    """No data folder set: the default is ``vflfs/datasets`` under this cache folder."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "vflfs" / "datasets"


def test_path_is_the_user_cache_folder_unless_set(cache_home, monkeypatch, tmp_path, capsys):
    assert default_data_dir() == cache_home
    assert main(["path"]) == 0
    assert capsys.readouterr().out.strip() == str(cache_home)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "env"))
    assert main(["path"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "env")
    assert main(["path", "--data-dir", str(tmp_path / "flag")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "flag")


def test_list_shows_the_folder_and_what_is_missing(cache_home, capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert f"data folder: {cache_home}" in out
    assert "madelon" in out and "missing" in out and "(vflfs data fetch sylva)" in out
    assert "vflfs data fetch all" in out


def test_list_marks_the_reference_files_ok(data_dir, capsys):
    assert main(["list", "--data-dir", str(data_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert len(lines) == 9 and all(" ok " in line for line in lines), lines


def test_fetch_all_skips_files_present_and_valid(data_dir, capsys):
    """No download happens: every reference file already has the recorded checksum."""
    assert main(["fetch", "all", "--data-dir", str(data_dir)]) == 0
    captured = capsys.readouterr()
    assert f"data folder: {data_dir}" in captured.out and "ready: madelon, arcene" in captured.out
    assert captured.err.count("present and valid") == 9


def test_fetch_names_source_and_licence_and_refuses_a_wrong_checksum(tmp_path, capsys):
    madelon_sources(tmp_path / "sources")  # tiny files: not the published data
    code = main(["fetch", "madelon", "--sources", str(tmp_path / "sources"), "--data-dir",
                 str(tmp_path / "data")])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 1
    assert "source: UCI MADELON" in captured.err and "licence: CC BY 4.0" in captured.err
    assert "not the recorded" in captured.err and "failed: madelon" in captured.err
    assert not (tmp_path / "data" / "madelon.npz").exists()


def test_fetch_unknown_name_lists_the_names(tmp_path, capsys):
    assert main(["fetch", "gisette", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no benchmark named 'gisette'" in err and "phishing" in err and "'all'" in err


def test_loader_reads_the_default_folder_and_names_the_fetch_command(cache_home):
    with pytest.raises(DataError) as info:
        load_dataset("arcene")
    message = str(info.value)
    assert "`vflfs data fetch arcene`" in message and str(cache_home / "arcene.npz") in message
    cache_home.mkdir(parents=True)
    X = np.arange(12, dtype=np.float32).reshape(6, 2)
    np.savez(cache_home / "arcene.npz", X=X, y=np.arange(6) % 2)
    assert load_dataset("arcene").X.shape == (6, 2)


def test_vflfs_command_dispatches_data(cache_home):
    result = subprocess.run(
        [sys.executable, "-m", "vflfs.cli", "data", "path"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(cache_home)
    top = subprocess.run([sys.executable, "-m", "vflfs.cli"], capture_output=True, text=True)
    assert "data" in top.stdout and "report" in top.stdout
