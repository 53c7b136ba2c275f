"""Known relevant columns of the user's own data (npz, csv, party files): checked, then scored."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vflfs.client_app.app import app as client_app
from vflfs.datasets import DataError, load_dataset
from vflfs.federation import LocalGrid
from vflfs.runtime.cli import outcome, run_job
from vflfs.runtime.config import compose_config
from vflfs.runtime.split_files import main as split_main
from vflfs.server_app.experiment import Experiment
from vflfs.server_app.run import run_experiment

from helpers import run_local

pytestmark = pytest.mark.usefixtures("fresh_dataset_cache")

# A teacher set with 4 relevant columns among 24 (labels read only them).
TEACHER = (
    "dataset=teacher dataset.params.n_samples=400 dataset.params.n_features=24 "
    "dataset.params.n_relevant=4 training.batch_size=64 device=cpu"
)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLFS_CACHE_DIR", str(tmp_path / "cache"))


def teacher_arrays() -> tuple[np.ndarray, np.ndarray, list[int]]:
    ds = load_dataset("teacher", n_samples=400, n_features=24, n_relevant=4)
    return np.asarray(ds.X), np.asarray(ds.y), ds.relevant.tolist()


def write_csv(path: Path) -> list[str]:
    """The teacher set as a CSV with an ID column first and the label last; the relevant
    columns' names."""
    X, y, relevant = teacher_arrays()
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    frame.insert(0, "id", np.arange(len(y)))
    frame["label"] = y
    frame.to_csv(path, index=False)
    return [f"f{j}" for j in relevant]


# -- the loaders -------------------------------------------------------------------------------


def test_npz_takes_column_indices(tmp_path):
    X, y, relevant = teacher_arrays()
    np.savez(tmp_path / "d.npz", X=X, y=y)
    ds = load_dataset("npz", path=str(tmp_path / "d.npz"), relevant=relevant[::-1])
    assert ds.relevant.tolist() == relevant
    assert load_dataset("npz", path=str(tmp_path / "d.npz")).relevant is None


def test_csv_takes_names_or_feature_indices(tmp_path):
    names = write_csv(tmp_path / "d.csv")
    common = {"path": str(tmp_path / "d.csv"), "label_column": "label", "drop_columns": ["id"]}
    by_name = load_dataset("csv", **common, relevant=names)
    by_index = load_dataset("csv", **common, relevant=[int(n[1:]) for n in names])
    assert by_name.relevant.tolist() == by_index.relevant.tolist() == [int(n[1:]) for n in names]


@pytest.mark.parametrize(
    ("relevant", "message"),
    [
        ([0, 24], "dataset.params.relevant: column 24 is out of range 0..23 .* fix: use 0-based"),
        ([-1], "column -1 is out of range"),
        (["f0"], "'f0' is a name, but this data has no column names; fix: give column indices"),
        ([1.5], "1.5 is not a column index"),
        ([2, 2], "names column\\(s\\) \\[2\\] more than once"),
        ([], "dataset.params.relevant is an empty list; fix: list the known relevant columns"),
        (3, "dataset.params.relevant must be a list of columns"),
    ],
)
def test_npz_refuses_bad_relevant_columns(tmp_path, relevant, message):
    X, y, _ = teacher_arrays()
    np.savez(tmp_path / "d.npz", X=X, y=y)
    with pytest.raises(DataError, match=message):
        load_dataset("npz", path=str(tmp_path / "d.npz"), relevant=relevant)


def test_csv_refuses_unknown_names_and_non_features(tmp_path):
    write_csv(tmp_path / "d.csv")
    common = {"path": str(tmp_path / "d.csv"), "label_column": "label", "drop_columns": ["id"]}
    with pytest.raises(DataError, match="no feature column is named 'age'; fix: use names from"):
        load_dataset("csv", **common, relevant=["age"])
    with pytest.raises(DataError, match="no feature column is named 'label'"):
        load_dataset("csv", **common, relevant=["label"])


def test_party_files_need_one_list_per_party(tmp_path):
    (tmp_path / "labels.csv").write_text("id,y\n0,1\n1,0\n")
    cfg = compose_config(
        f"dataset=party_files dataset.labels_path={tmp_path / 'labels.csv'} "
        "split.num_parties=2 dataset.relevant=[0,3] dataset.classes=[0,1]"
    )
    with pytest.raises(DataError, match="dataset.relevant must hold one list .* per party \\(2"):
        Experiment.from_config(cfg)


# -- end to end: results.json scores the selection ---------------------------------------------


def run(cwd: Path, *args: str) -> dict:
    """``vflfs-run``'s job (engine=local) in this process; results.json's content."""
    return run_job(compose_config([*args, "engine=local", "training.epochs=2"]), cwd / "out")


def assert_all_kept(summary: dict, n_relevant: int, n_features: int) -> None:
    """``vfl`` keeps every column: every relevant one is found, among all the others."""
    assert summary["selection"]["recall"] == 1.0
    assert summary["selection"]["precision"] == pytest.approx(n_relevant / n_features)


def test_npz_run_reports_precision_and_recall(tmp_path):
    X, y, relevant = teacher_arrays()
    np.savez(tmp_path / "d.npz", X=X, y=y)
    summary = run(
        tmp_path, "dataset=npz", f"dataset.params.path={tmp_path / 'd.npz'}",
        f"dataset.params.relevant=[{','.join(map(str, relevant[:3]))}]", "split.num_parties=2",
    )  # fmt: skip
    assert_all_kept(summary, 3, 24)
    assert "; 24 of 24 features (precision 0.12, recall 1.00); " in outcome(summary)


def test_csv_run_reports_precision_and_recall_by_name(tmp_path):
    names = write_csv(tmp_path / "d.csv")
    summary = run(
        tmp_path, "dataset=csv", f"dataset.params.path={tmp_path / 'd.csv'}",
        "dataset.params.label_column=label", "+dataset.params.drop_columns=[id]",
        f"dataset.params.relevant=[{','.join(names)}]",
    )  # fmt: skip
    assert_all_kept(summary, 4, 24)


def test_party_files_run_reports_precision_and_recall(tmp_path):
    """``vflfs split`` of a set with known columns passes them on as per-party lists."""
    assert split_main([str(tmp_path / "parts"), *TEACHER.split(), "split=random"]) == 0
    manifest = json.loads((tmp_path / "parts" / "split.json").read_text())
    lists = [p["relevant"] for p in manifest["parties"]]
    assert (
        f"dataset.relevant=[{','.join(str(v).replace(' ', '') for v in lists)}]"
        in (manifest["server_overrides"])
    )
    paths = ",".join(p["path"] for p in manifest["parties"])
    summary = run(tmp_path, *manifest["server_overrides"], f"dataset.party_paths=[{paths}]")
    assert_all_kept(summary, 4, 24)


def test_party_files_score_the_selection_as_the_dataset_run(tmp_path):
    """A selecting strategy on the dataset and on its per-party files (shuffled rows, columns
    numbered party after party): the same precision and recall."""
    over = f"{TEACHER} split=random strategy=random_fs training.epochs=1 seed=3"
    expected = run_local(compose_config(over), tmp_path / "dataset")
    assert split_main([str(tmp_path / "parts"), *over.split()]) == 0
    manifest = json.loads((tmp_path / "parts" / "split.json").read_text())
    paths = ",".join(p["path"] for p in manifest["parties"])
    cfg = compose_config([*manifest["server_overrides"], f"dataset.party_paths=[{paths}]"])
    got = run_local(cfg, tmp_path / "files")
    for key in ("precision", "recall", "selected_features"):
        assert got["selection"][key] == expected["selection"][key]
    assert 0 < got["selection"]["recall"] < 1
    widths = [len(p["columns"]) for p in got["parties"]]
    assert got["parties"][1]["columns"][0] == widths[0]  # party 1's columns follow party 0's


def test_party_files_out_of_range_is_named_before_training(tmp_path):
    assert split_main([str(tmp_path / "parts"), *TEACHER.split(), "split.num_parties=2"]) == 0
    manifest = json.loads((tmp_path / "parts" / "split.json").read_text())
    paths = ",".join(p["path"] for p in manifest["parties"])
    overrides = [o for o in manifest["server_overrides"] if not o.startswith("dataset.relevant")]
    cfg = compose_config(
        [*overrides, f"dataset.party_paths=[{paths}]", "dataset.relevant=[[0],[12]]"]
    )
    with pytest.raises(DataError, match=r"dataset.relevant\[1\]: column 12 is out of range 0..11"):
        run_experiment(LocalGrid(client_app, 2), cfg, tmp_path / "out")
    assert "dataset.relevant[1]" in (tmp_path / "out" / "error.txt").read_text()
    assert not (tmp_path / "out" / "history.csv").exists()
