"""Party operations for per-party files (deployment): sample alignment and the party's own data.

A party whose SuperNode was started with ``--node-config "data-path='/abs/file.csv'
id-column='id'"`` reads its features from that file only. Node config keys:

* ``data-path``: the party's file (.csv, .parquet or .npz), an absolute path;
* ``id-column``: its sample ID column (default: the server's ``dataset.id_column``);
* ``cache-dir``: where the file's memory-mapped cache goes (default ``$VFLFS_CACHE_DIR`` or
  ``~/.cache/vflfs``);
* ``device``: the torch device of this party (``cpu``, ``cuda``, ``cuda:1``...), overriding the
  run's ``device``.
"""

from __future__ import annotations

from pathlib import Path

from flwr.app import ConfigRecord

from vflfs.datasets.alignment import salted_hashes
from vflfs.datasets.party_files import load_party_file
from vflfs.federation import Payload

from .registry import OPERATIONS
from .session import Session

ALIGNED = "vflfs.align"  # context.state record: the file this party aligned in this run


def _node(session: Session, key: str) -> str | None:
    value = session.context.node_config.get(key)
    return None if value is None or str(value) == "" else str(value)


def _source(session: Session, payload: Payload) -> dict[str, str]:
    """The party's file: its node config's ``data-path``, else the server's fallback path."""
    path = _node(session, "data-path") or payload.get("path")
    if not path:
        raise ValueError(
            f"party {session.partition_id} has no data file: start its SuperNode with "
            "--node-config \"partition-id=... data-path='/abs/path/party.csv' id-column='id'\" "
            "(or, in simulation, set dataset.party_paths)"
        )
    if not Path(path).expanduser().is_absolute():
        raise ValueError(
            f"party {session.partition_id}: data-path must be an absolute path, got {path!r}"
        )
    return {
        "path": str(Path(path).expanduser()),
        "id_column": _node(session, "id-column") or str(payload.get("id_column") or "id"),
        "cache_dir": _node(session, "cache-dir") or "",
    }


@OPERATIONS.operation("query.align")
def align(session: Session, payload: Payload) -> Payload:
    """The salted hashes of this party's sample IDs (with the run's salt) and its column count.

    The party remembers which file it aligned; the server's setup then sends the positions of
    this party's rows in the aligned order.
    """
    source = _source(session, payload)
    table = load_party_file(source["path"], source["id_column"], source["cache_dir"] or None)
    session.context.state[ALIGNED] = ConfigRecord(
        {**source, "alignment": str(payload["alignment"]), "n_rows": int(len(table.ids))}
    )
    return {
        "hashes": salted_hashes(bytes(payload["salt"]), table.ids),
        "n_features": table.n_features,
    }


def local_spec(session: Session, spec: dict) -> dict:
    """The setup instructions completed with what only this party's node knows: its own
    file (after alignment) and its device."""
    data = spec["data"]
    if "party_file" in data:
        aligned = session.context.state.get(ALIGNED)
        if aligned is None or str(aligned["alignment"]) != str(data["party_file"]["alignment"]):
            raise ValueError(
                f"party {session.partition_id} was not aligned in this run; the server must "
                "send 'query.align' before 'query.setup'"
            )
        for key in ("path", "id_column", "cache_dir"):
            data["party_file"][key] = str(aligned[key])
    elif _node(session, "data-path"):
        raise ValueError(
            f"party {session.partition_id} reads its own file (node config data-path="
            f"{_node(session, 'data-path')!r}) but the run's dataset is "
            f"{data.get('name')!r}; fix: run with dataset=party_files (docs/deployment.md)"
        )
    device = _node(session, "device")
    if device:
        spec["device"] = device
    return spec
