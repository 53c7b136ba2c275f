"""Parties prove who they are: Ed25519 signatures of a fresh nonce, checked before alignment.

Real keys (``vflfs keygen``), real signatures, the real ClientApp over the in-process grid with
each node naming its own party file and private key, as SuperNodes do in deployment.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from vflfs.client_app.app import app as client_app
from vflfs.federation import DOWN, UP, LocalGrid, PartyError, decode
from vflfs.federation.identity import KeyFileError
from vflfs.protocol import ALIGN, IDENTIFY, INFO, IdentifyReply, IdentifyRequest
from vflfs.runtime.config import compose_config
from vflfs.runtime.keygen import main as keygen_main
from vflfs.runtime.settings import FederationSettings
from vflfs.server_app.identity import IdentityError, _check_signature, party_keys
from vflfs.server_app.run import run_experiment

from helpers import TINY, split_files

PARTS = f"{TINY} split.num_parties=2 training.epochs=1"
RUN_ID = 7


@pytest.fixture(scope="module")
def parties(tmp_path_factory):
    """Two party files and a key pair per party, plus a stranger's pair."""
    root = tmp_path_factory.mktemp("identity")
    manifest = split_files(root / "parts", PARTS)
    names = [str(root / "keys" / n) for n in ("party_0", "party_1", "stranger")]
    assert keygen_main(names) == 0
    return manifest, {n.rsplit("/", 1)[1]: n for n in names}


def run_with_keys(manifest, out, listed, held, data=None, operations=None, observer=None):
    """A run whose server lists ``listed`` public keys and whose nodes hold ``held`` private
    keys (None: no key) and read ``data`` (default: their own files)."""
    keys = ",".join(f"{k}.pub" for k in listed)
    overrides = " ".join(manifest["server_overrides"]) + f" 'federation.party_keys=[{keys}]'"
    cfg = compose_config(overrides)
    grid = LocalGrid(client_app, 2, run_id=RUN_ID)
    for context in grid._state.values():
        pid = int(context.node_config["partition-id"])
        path = (data or [p["path"] for p in manifest["parties"]])[pid]
        context.node_config.update({"data-path": path, "id-column": "id"})
        if held[pid]:
            context.node_config["identity-key"] = f"{held[pid]}.key"
    observers = [] if operations is None else [lambda d, p, op, c: operations.append(op)]
    observers += [observer] if observer else []
    return run_experiment(grid, cfg, out, observers=observers)


def test_keygen_writes_a_private_key_only_its_owner_reads(parties):
    _, keys = parties
    private = keys["party_0"] + ".key"
    assert os.stat(private).st_mode & 0o777 == 0o600
    assert Path(keys["party_0"] + ".pub").read_text().startswith("-----BEGIN PUBLIC KEY-----")
    assert keygen_main([keys["party_0"]]) == 1  # never overwrites a key silently


def test_parties_with_their_keys_are_accepted_before_alignment(parties, tmp_path):
    manifest, keys = parties
    ops: list[str] = []
    both = [keys["party_0"], keys["party_1"]]
    got = run_with_keys(manifest, tmp_path / "out", both, both, operations=ops)
    assert got["status"] == "completed"
    # The handshake comes after the parties' info and before any of their data is asked for.
    assert ops.index(IDENTIFY.name) > ops.index(INFO.name)
    assert ops.index(IDENTIFY.name) < ops.index(ALIGN.name)


def test_a_signature_holds_for_its_own_run_and_nonce_only(parties, tmp_path):
    """A party's recorded answer cannot be replayed in another run or to another nonce."""
    manifest, keys = parties
    wire: dict = {}

    def observer(direction, party, operation, content) -> None:
        if operation == IDENTIFY.name:
            wire[direction, party] = decode(content)

    both = [keys["party_0"], keys["party_1"]]
    run_with_keys(manifest, tmp_path / "out", both, both, observer=observer)
    cfg = compose_config(f"'federation.party_keys=[{both[0]}.pub,{both[1]}.pub]'")
    listed = party_keys(FederationSettings.from_cfg(cfg).party_keys, 2)
    sent = IdentifyRequest.from_payload(wire[DOWN, 1])
    reply = IdentifyReply.from_payload(wire[UP, 1])
    _check_signature(1, reply, listed, RUN_ID, sent.nonce)  # the run's own: accepted
    with pytest.raises(IdentityError, match="does not verify"):
        _check_signature(1, reply, listed, RUN_ID + 1, sent.nonce)
    with pytest.raises(IdentityError, match="does not verify"):
        _check_signature(1, reply, listed, RUN_ID, bytes(32))


def test_a_wrong_key_is_refused_before_any_data_leaves(parties, tmp_path):
    manifest, keys = parties
    ops: list[str] = []
    listed = [keys["party_0"], keys["party_1"]]
    with pytest.raises(IdentityError, match=r"party 1 failed the identity check.*impostor"):
        run_with_keys(
            manifest, tmp_path / "out", listed, [keys["party_0"], keys["stranger"]], operations=ops
        )
    assert ALIGN.name not in ops
    error = (tmp_path / "out" / "error.txt").read_text()
    assert "federation.party_keys[1]" in error and "fix:" in error


def test_one_party_answering_for_two_partitions_is_named(parties, tmp_path):
    manifest, keys = parties
    listed = [keys["party_0"], keys["party_1"]]
    with pytest.raises(IdentityError, match="signed with partition 0's key"):
        run_with_keys(manifest, tmp_path / "out", listed, [keys["party_0"], keys["party_0"]])


def test_a_party_without_a_key_is_told_how_to_give_it_one(parties, tmp_path):
    manifest, keys = parties
    listed = [keys["party_0"], keys["party_1"]]
    with pytest.raises(IdentityError, match="party 0 has no identity key.*identity-key="):
        run_with_keys(manifest, tmp_path / "out", listed, [None, keys["party_1"]])


def test_a_duplicated_party_file_is_refused(parties, tmp_path):
    """Partition 1 holds a reordered copy of partition 0's file, with its own valid key."""
    manifest, keys = parties
    copy = tmp_path / "copy.csv"
    lines = Path(manifest["parties"][0]["path"]).read_text().splitlines()
    copy.write_text("\n".join([lines[0], *reversed(lines[1:])]) + "\n")
    both = [keys["party_0"], keys["party_1"]]
    data = [manifest["parties"][0]["path"], str(copy)]
    with pytest.raises(IdentityError, match="parties 0 and 1 hold the same data"):
        run_with_keys(manifest, tmp_path / "out", both, both, data=data)


def test_a_second_node_answering_for_a_partition_is_refused(parties, tmp_path):
    manifest, keys = parties
    cfg = compose_config(" ".join(manifest["server_overrides"]))
    grid = LocalGrid(client_app, 2)
    for context in grid._state.values():
        context.node_config["partition-id"] = 1  # both nodes claim partition 1
    with pytest.raises(PartyError, match=r"reports partition-id 1 as node \d+ does.*fix: stop"):
        run_experiment(grid, cfg, tmp_path / "out")


def test_the_key_list_is_checked(parties, tmp_path):
    manifest, keys = parties
    with pytest.raises(KeyFileError, match="one public key per partition"):
        run_with_keys(manifest, tmp_path / "a", [keys["party_0"]], [keys["party_0"], None])
    with pytest.raises(KeyFileError, match="are the same key"):
        run_with_keys(manifest, tmp_path / "b", [keys["party_0"]] * 2, [keys["party_0"]] * 2)
    shutil.copy(keys["party_0"] + ".key", tmp_path / "private.pub")  # a private key listed
    with pytest.raises(KeyFileError, match=r"party_keys\[1\] is not a PEM public key"):
        run_with_keys(
            manifest, tmp_path / "c", [keys["party_0"], str(tmp_path / "private")], [None, None]
        )


def test_without_keys_runs_as_before(parties, tmp_path):
    manifest, _ = parties
    cfg = compose_config(" ".join(manifest["server_overrides"]))
    assert cfg.federation.party_keys is None
    ops: list[str] = []
    got = run_with_keys(manifest, tmp_path / "out", [], [None, None], operations=ops)
    assert got["status"] == "completed" and IDENTIFY.name not in ops
