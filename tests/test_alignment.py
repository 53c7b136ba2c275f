"""Per-party files and sample alignment: the maths, the files, the protocol over a LocalGrid."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from flwr.common.serde import recorddict_to_proto

from vflfs.client_app.app import app as client_app
from vflfs.datasets import DataError
from vflfs.datasets.alignment import (
    AlignmentError,
    blind,
    intersect,
    new_key,
    party_blinding,
    raise_to_key,
)
from vflfs.datasets.party_files import load_labels_file, load_party_file
from vflfs.federation import LocalGrid, PartyError
from vflfs.runtime.config import ConfigError, compose_config
from vflfs.runtime.split_files import main as split_main
from vflfs.server_app.app import check_server_paths
from vflfs.server_app.run import run_experiment
from vflfs.strategies import STRATEGIES

from helpers import TINY, run_local, run_on_files, split_files


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLFS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


# -- the maths ---------------------------------------------------------------------------------


def psi(server_ids: list[str], *party_ids: list[str]):
    """The protocol's three steps in one process: (keep, rows of each party, what the server
    received from each party, the server's key)."""
    s = new_key()
    points = blind(s, server_ids)
    blindings = [party_blinding(new_key(), points, np.asarray(ids)) for ids in party_ids]
    own = [raise_to_key(s, b.own) for b in blindings]
    keep, positions = intersect([b.labels for b in blindings], own)
    rows = [b.order[p] for b, p in zip(blindings, positions, strict=True)]
    return keep, rows, blindings, s


def test_psi_keeps_the_server_order_and_gives_each_party_its_rows():
    keep, rows, blindings, _ = psi(
        ["a", "b", "c", "d", "e"],
        ["e", "x", "a", "c", "d"],  # no "b"
        ["d", "c", "a", "y"],  # no "b", no "e"
    )
    assert keep.tolist() == [0, 2, 3]  # a, c, d in the labels file's order
    assert rows[0].tolist() == [2, 3, 4] and rows[1].tolist() == [2, 1, 0]
    for b in blindings:  # a party's points are sorted by value, not in its rows' order
        assert b.own.shape[1] == 33 and b.own.dtype == np.uint8
        assert [r.tobytes() for r in b.own] == sorted(r.tobytes() for r in b.own)


def test_ids_compare_as_text_and_keys_are_fresh():
    keep, _, _, _ = psi(["7", "07", "7.0"], ["7", "8"])
    assert keep.tolist() == [0]
    a, b = new_key(), new_key()
    assert len(a) == 32 and a != b
    assert not np.array_equal(blind(a, ["7"]), blind(b, ["7"]))


def test_the_server_cannot_test_guessed_ids_against_a_party():
    """The attack on salted hashes (hash every candidate ID, compare) finds nothing: the
    party's points depend on its key, which never leaves it."""
    ids = [str(i) for i in range(200)]
    _, _, blindings, s = psi(["0", "1"], ids)
    received = {r.tobytes() for r in blindings[0].own}
    reblinded = {r.tobytes() for r in raise_to_key(s, blindings[0].own)}
    for guess in (blind(s, ids), blind(new_key(), ids)):
        assert not received & {r.tobytes() for r in guess}
        assert not reblinded & {r.tobytes() for r in guess}


def test_intersect_names_the_party_with_duplicate_ids():
    s, k = new_key(), new_key()
    labels = raise_to_key(k, blind(s, ["a", "b"]))
    twice = raise_to_key(s, blind(k, ["a", "a", "b"]))
    with pytest.raises(AlignmentError, match="party 1 has 1 duplicate") as info:
        intersect([labels, labels], [raise_to_key(s, blind(k, ["a", "b"])), twice])
    assert info.value.party == 1


# -- the files ---------------------------------------------------------------------------------


def test_csv_parquet_and_npz_party_files_load_the_same(tmp_path, cache_dir):
    ids = np.asarray(["007", "3", "x9"])
    X = np.asarray([[0.1, 2], [np.float32(1 / 3), -4], [5e-8, 6]], dtype=np.float32)
    frame = pd.DataFrame({"key": ids, "f0": X[:, 0], "f1": X[:, 1]})
    frame.to_csv(tmp_path / "p.csv", index=False, float_format="%.9g")
    frame.to_parquet(tmp_path / "p.parquet", index=False)
    np.savez(tmp_path / "p.npz", X=X, key=ids)
    for name in ("p.csv", "p.parquet", "p.npz"):
        table = load_party_file(tmp_path / name, "key")
        assert table.ids.tolist() == ["007", "3", "x9"], name  # text as written, not 7
        np.testing.assert_array_equal(table.X, X)
        assert isinstance(table.X, np.memmap)  # served from the cache
    assert len(list((cache_dir / "party-files").iterdir())) == 3


def test_an_edited_party_file_is_read_again(tmp_path):
    path = tmp_path / "p.csv"
    pd.DataFrame({"id": [1, 2], "f": [1.0, 2.0]}).to_csv(path, index=False)
    assert load_party_file(path).X[:, 0].tolist() == [1.0, 2.0]
    pd.DataFrame({"id": [1, 2, 3], "f": [5.0, 6.0, 7.0]}).to_csv(path, index=False)
    assert load_party_file(path).X[:, 0].tolist() == [5.0, 6.0, 7.0]


@pytest.mark.parametrize(
    "frame, message",
    [
        (pd.DataFrame({"other": [1, 2], "f": [1.0, 2.0]}), "no ID column 'id'"),
        (pd.DataFrame({"id": [1, 1], "f": [1.0, 2.0]}), "occur more than once"),
        (pd.DataFrame({"id": [1, 2], "f": ["a", "b"]}), "not numeric"),
        (pd.DataFrame({"id": [1, 2], "f": [1.0, np.nan]}), "NaN or infinite"),
        (pd.DataFrame({"id": [1, None], "f": [1.0, 2.0]}), "missing"),
        (pd.DataFrame({"id": [], "f": []}), "has no rows \\(only a header\\)"),
    ],
)
def test_bad_party_files_are_refused(tmp_path, frame, message):
    frame.to_csv(tmp_path / "p.csv", index=False)
    with pytest.raises(DataError, match=message):
        load_party_file(tmp_path / "p.csv")


def test_the_labels_file_reads_only_ids_labels_and_split(tmp_path):
    frame = pd.DataFrame(
        {"id": ["a", "b", "c"], "y": [1, 0, 1], "split": ["train", "test", "train"]}
    )
    frame["notes"] = ["free text", "not numeric", "ignored"]  # never read
    frame.to_csv(tmp_path / "labels.csv", index=False)
    labels = load_labels_file(tmp_path / "labels.csv", min_class_count=1)
    assert labels.ids.tolist() == ["a", "b", "c"]
    assert labels.labels.y.tolist() == [1, 0, 1]
    assert labels.labels.train_idx.tolist() == [0, 2] and labels.labels.test_idx.tolist() == [1]
    frame["split"] = ["train", "valid", "test"]
    frame.to_csv(tmp_path / "labels.csv", index=False)
    with pytest.raises(DataError, match="only 'train' and 'test'"):
        load_labels_file(tmp_path / "labels.csv", min_class_count=1)


def test_split_command_writes_files_and_commands(tmp_path, capsys):
    manifest = split_files(tmp_path / "parts", f"{TINY} split.num_parties=3 split=random")
    printed = capsys.readouterr().out
    assert [p["rows"] for p in manifest["parties"]] == [600, 600, 600]
    assert sorted(c for p in manifest["parties"] for c in p["columns"]) == list(range(40))
    for m, party in enumerate(manifest["parties"]):
        assert f"partition-id={m} num-partitions=3 data-path='{party['path']}'" in printed
    assert "dataset=party_files" in manifest["server_overrides"]
    assert split_main([str(tmp_path / "x"), "dataset=nosuch"]) == 2
    assert "Could not find 'dataset/nosuch'" in capsys.readouterr().err


# -- the protocol ------------------------------------------------------------------------------


def test_party_files_with_partial_overlap_train_on_the_intersection(tmp_path):
    """Each file drops its own 10% of the samples; the run on the intersection equals a run on
    a dataset holding exactly those samples, in the labels file's order."""
    over = f"{TINY} split.num_parties=2 training.epochs=2"
    manifest = split_files(tmp_path / "parts", over, "--drop", "0.1", "--format", "parquet")
    parts = [pd.read_parquet(p["path"]) for p in manifest["parties"]]
    labels = pd.read_parquet(manifest["labels"]["path"])
    common = [i for i in labels["id"] if all(i in set(p["id"]) for p in parts)]
    assert 400 < len(common) < 540
    X = np.hstack([p.set_index("id").loc[common].to_numpy(np.float32) for p in parts])
    y = labels.set_index("id").loc[common, "y"].to_numpy()
    np.savez(tmp_path / "common.npz", X=X, y=y)
    widths = np.cumsum([0] + [len(p["columns"]) for p in manifest["parties"]])
    columns = [list(range(a, b)) for a, b in zip(widths[:-1], widths[1:], strict=True)]
    plain = compose_config(
        f"training.batch_size=64 training.epochs=2 split.num_parties=2 dataset=npz "
        f"dataset.params.path={tmp_path / 'common.npz'} split=columns 'split.columns={columns}'"
    )
    expected = run_local(plain, tmp_path / "plain")
    got = run_on_files(manifest, tmp_path / "files")
    assert got["alignment"]["aligned"] == len(common) == sum(got["samples"].values())
    assert got["step_losses"] == expected["step_losses"]
    assert got["test_metric"] == expected["test_metric"]


def test_a_party_without_its_file_is_named(tmp_path):
    manifest = split_files(tmp_path / "parts", f"{TINY} split.num_parties=2")
    cfg = compose_config(" ".join(manifest["server_overrides"]))
    with pytest.raises(PartyError, match="party 0 failed in 'query.align'.*no data file"):
        run_experiment(LocalGrid(client_app, 2), cfg, tmp_path / "out")
    assert "party 0" in (tmp_path / "out" / "error.txt").read_text()


def test_a_node_with_its_own_file_refuses_a_shared_dataset(tmp_path):
    manifest = split_files(tmp_path / "parts", f"{TINY} split.num_parties=2")
    manifest["server_overrides"] = [f"{TINY} split.num_parties=2"]  # not dataset=party_files
    with pytest.raises(PartyError, match="party 0 failed in 'query.setup'.*dataset=party_files"):
        run_on_files(manifest, tmp_path / "out")


def test_no_common_samples_is_a_clear_error(tmp_path):
    manifest = split_files(tmp_path / "parts", f"{TINY} split.num_parties=2")
    labels = pd.read_csv(manifest["labels"]["path"], dtype={"id": str})
    labels["id"] = "other-" + labels["id"]
    labels.to_csv(manifest["labels"]["path"], index=False)
    with pytest.raises(AlignmentError, match="too few samples: 0 samples in common"):
        run_on_files(manifest, tmp_path / "out")


def test_no_id_travels_in_any_message(tmp_path):
    """Every message of a run on party files, serialised as on the wire, holds no ID."""
    manifest = split_files(tmp_path / "parts", f"{TINY} split.num_parties=2 training.epochs=1")
    files = [manifest["labels"]["path"]] + [p["path"] for p in manifest["parties"]]
    for path in files:
        frame = pd.read_csv(path, dtype={"id": str})
        frame["id"] = "customer-" + frame["id"]
        frame.to_csv(path, index=False)
    wire: list[bytes] = []

    def observer(direction, party, operation, content) -> None:
        wire.append(recorddict_to_proto(content).SerializeToString())

    got = run_on_files(manifest, tmp_path / "out", observers=[observer])
    assert got["alignment"]["method"].startswith("ECDH-PSI") and len(wire) > 6
    blob = b"".join(wire)
    assert b"customer-" not in blob


def test_node_config_device_overrides_the_run_device(tmp_path):
    manifest = split_files(tmp_path / "parts", f"{TINY} split.num_parties=2 training.epochs=1")
    got = run_on_files(manifest, tmp_path / "out", node_config={"device": "cpu"})
    assert got["devices"]["parties"] == ["cpu", "cpu"]


def test_labels_path_must_be_absolute_under_flwr_run():
    with pytest.raises(ConfigError, match="dataset.labels_path must be an absolute path"):
        check_server_paths(compose_config("dataset=party_files dataset.labels_path=rel.csv"))
    check_server_paths(compose_config("dataset=party_files dataset.labels_path=/abs/l.csv"))


# Strategy options for the tiny runs: small Paillier keys (tests only), short schedules.
SHORT_PATH = "strategy.path.points=2 strategy.path.max_points=2 strategy.path.steps_per_point=6"
STRATEGY_OPTIONS = {
    "stg": SHORT_PATH,
    "group_lasso": SHORT_PATH,
    "fedsdg_fs": f"strategy.gini.key_bits=512 {SHORT_PATH}",
    "gini_filter": "strategy.gini.key_bits=512",
    "fstat_filter": "strategy.fstat.key_bits=512",
    "less_vfl": "strategy.server.epochs=5 strategy.party.epochs=5",
    "local_lasso": "strategy.party.epochs=5",
}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_strategy_gives_the_same_result_on_party_files(tmp_path, strategy):
    """The original dataset (each party takes its columns) and per-party files with shuffled
    rows (each party reads its own file, aligned by ID) train identically."""
    over = (
        f"{TINY} split=random split.num_parties=2 noise.ratio=0.5 training.epochs=3 "
        f"training.local_steps=2 strategy={strategy} {STRATEGY_OPTIONS.get(strategy, '')}"
    )
    expected = run_local(compose_config(over), tmp_path / "dataset")
    got = run_on_files(split_files(tmp_path / "parts", over, "--format", "npz"), tmp_path / "files")
    assert got["step_losses"] == expected["step_losses"]
    assert got["test_metric"] == expected["test_metric"]
    assert got["selection"]["per_party"] == expected["selection"]["per_party"]
    assert [p["spurious"] for p in got["parties"]] == [p["spurious"] for p in expected["parties"]]
