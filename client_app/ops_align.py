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

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord

from vflfs.datasets.alignment import check_points, new_key, party_blinding
from vflfs.datasets.errors import DataError
from vflfs.datasets.party_files import load_party_file
from vflfs.federation.payload import from_array, to_array
from vflfs.ml.parallel import resolve_workers
from vflfs.protocol import ALIGN, SETUP, AlignReply, AlignRequest

from .registry import OPERATIONS
from .session import Session

ALIGNED = "vflfs.align"  # context.state record: the file this party aligned in this run
ORDER = "vflfs.align_order"  # context.state record: its row behind each position it sent


def _node(session: Session, key: str) -> str | None:
    value = session.context.node_config.get(key)
    return None if value is None or str(value) == "" else str(value)


def _source(session: Session, request: AlignRequest) -> dict[str, str]:
    """The party's file: its node config's ``data-path``, else the server's fallback path."""
    path = _node(session, "data-path") or request.path
    if not path:
        message = (
            f"party {session.partition_id} has no data file; fix: start its SuperNode with "
            "--node-config \"partition-id=... data-path='/abs/path/party.csv' id-column='id'\" "
            "(or, in simulation, set dataset.party_paths)"
        )
        raise DataError(message, public=message)
    if not Path(path).expanduser().is_absolute():
        raise DataError(
            f"party {session.partition_id}: data-path must be an absolute path, got {path!r}",
            public=f"party {session.partition_id}: data-path must be an absolute path; fix: "
            "give the full path in its SuperNode's node config",
        )
    return {
        "path": str(Path(path).expanduser()),
        "id_column": _node(session, "id-column") or str(request.id_column or "id"),
        "cache_dir": _node(session, "cache-dir") or "",
    }


@OPERATIONS.operation(ALIGN)
def align(session: Session, request: AlignRequest) -> AlignReply:
    """This party's step of the private set intersection, with a fresh secret key: the
    server's blinded IDs raised to that key, its own blinded IDs sorted by value, and its column
    count (:mod:`vflfs.datasets.alignment`).

    The party remembers which file it aligned and which row stands behind each position of its
    sorted list; the server's setup then names the positions of its aligned samples.
    """
    source = _source(session, request)
    table = load_party_file(source["path"], source["id_column"], source["cache_dir"] or None)
    server_points = check_points(request.labels, None, "the server", None)
    workers = resolve_workers(request.workers)
    blinding = party_blinding(new_key(), server_points, table.ids, workers)
    session.store.put(
        ALIGNED,
        ConfigRecord(
            {**source, "alignment": str(request.alignment), "n_rows": int(len(table.ids))}
        ),
    )
    session.store.put(ORDER, ArrayRecord({"order": to_array(blinding.order)}))
    return AlignReply(labels=blinding.labels, ids=blinding.own, n_features=table.n_features)


def _rows(session: Session, positions: list[int]) -> list[int]:
    """This party's rows behind the server's ``positions`` in its sorted list."""
    order = from_array(session.store.get(ORDER)["order"])
    positions = np.asarray(positions, dtype=np.int64)
    if positions.size and (positions.min() < 0 or positions.max() >= len(order)):
        raise DataError(
            f"party {session.partition_id}: the server named positions outside 0.."
            f"{len(order) - 1}; fix: run the same vflfs version on the server and every party",
            public=f"party {session.partition_id}: the server named positions outside its "
            "list; fix: run the same vflfs version on the server and every party",
        )
    return order[positions].tolist()


def local_spec(session: Session, spec: dict) -> dict:
    """The setup instructions completed with what only this party's node knows: its own
    file (after alignment) and its device."""
    data = spec["data"]
    if "party_file" in data:
        aligned = session.store.get(ALIGNED)
        if aligned is None or str(aligned["alignment"]) != str(data["party_file"]["alignment"]):
            message = (
                f"party {session.partition_id} was not aligned in this run; fix: the server "
                f"must send {ALIGN.name!r} before {SETUP.name!r}"
            )
            raise DataError(message, public=message)
        for key in ("path", "id_column", "cache_dir"):
            data["party_file"][key] = str(aligned[key])
        data["party_file"]["rows"] = _rows(session, data["party_file"].pop("positions"))
    elif _node(session, "data-path"):
        fix = "fix: run with dataset=party_files (docs/deployment.md)"
        raise DataError(
            f"party {session.partition_id} reads its own file (node config data-path="
            f"{_node(session, 'data-path')!r}) but the run's dataset is "
            f"{data.get('name')!r}; {fix}",
            public=f"party {session.partition_id} reads its own file (node config data-path) "
            f"but the run's dataset is {data.get('name')!r}; {fix}",
        )
    device = _node(session, "device")
    if device:
        spec["device"] = device
    return spec
