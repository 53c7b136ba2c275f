"""What a failing party tells the server: the problem and the fix, never its IDs or paths.

Real message round-trips: a LocalGrid serialises every message and calls the real ClientApp.
"""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from vflfs.federation import PartyError
from vflfs.federation.payload import decode_error
from vflfs.federation.traffic import UP
from vflfs.protocol import Failure

from helpers import TINY, run_on_files, split_files

SECRET_ID = "patient-4711"


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLFS_CACHE_DIR", str(tmp_path / "cache"))


def _replies(seen: list, party: int) -> list[Failure]:
    return [e for d, p, _, c in seen if d == UP and p == party and (e := decode_error(c))]


def test_a_party_error_reply_holds_neither_its_ids_nor_its_path(tmp_path, caplog):
    manifest = split_files(tmp_path / "parts", f"{TINY} split.num_parties=2")
    path = manifest["parties"][1]["path"]
    frame = pd.read_csv(path, dtype={"id": str})
    frame.loc[[0, 1], "id"] = SECRET_ID  # a duplicate ID: the party's full message quotes it
    frame.to_csv(path, index=False)
    seen: list = []
    failed = pytest.raises(PartyError, match="party 1 failed in 'query.align'")
    with caplog.at_level(logging.ERROR, logger="vflfs"), failed as info:
        run_on_files(manifest, tmp_path / "out", observers=[lambda *a: seen.append(a)])
    (reply,) = _replies(seen, 1)
    assert set(reply.to_payload()) == {"operation", "type", "message"}  # no traceback
    assert "1 sample ID(s) occur more than once" in reply.message
    assert "fix: give each row a distinct ID" in reply.message
    shown = [str(reply), str(info.value), (tmp_path / "out" / "error.txt").read_text()]
    for text in shown:
        assert SECRET_ID not in text and path not in text and str(tmp_path) not in text
    # the party's own log has the details
    assert SECRET_ID in caplog.text and path in caplog.text


def test_a_header_only_party_file_says_no_rows(tmp_path):
    manifest = split_files(tmp_path / "parts", f"{TINY} split.num_parties=2")
    path = manifest["parties"][0]["path"]
    pd.read_csv(path).head(0).to_csv(path, index=False)
    with pytest.raises(PartyError, match="party 0 failed in 'query.align'.*no rows") as info:
        run_on_files(manifest, tmp_path / "out")
    assert "not numeric" not in str(info.value) and path not in str(info.value)


def test_any_other_error_of_a_party_with_its_own_file_sends_only_its_type(tmp_path, caplog):
    manifest = split_files(tmp_path / "parts", f"{TINY} split.num_parties=2")
    seen: list = []
    failed = pytest.raises(PartyError, match="party 0 failed in 'query.setup'")
    with caplog.at_level(logging.ERROR, logger="vflfs"), failed as info:
        run_on_files(
            manifest,
            tmp_path / "out",
            node_config={"device": "nosuch"},  # torch refuses it during setup
            observers=[lambda *a: seen.append(a)],
        )
    (reply,) = _replies(seen, 0)
    assert "the party's log" in reply.message and "nosuch" not in reply.message
    assert "party's log" in str(info.value)
    assert "nosuch" in caplog.text  # the party's log has the message
