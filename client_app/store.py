"""A party's state on its own disk, so that a run can resume after the server or the party stops.

Where it goes: the node config's ``state-dir`` (deployment: a folder on the party's machine),
else the run config's ``party-state-dir`` (``vflfs-run`` names one inside the run's output folder
for ``engine=local`` and ``engine=simulation``); with neither, the party keeps its state in
Flower's ``context.state`` only, as always.

When: at the epoch boundaries the server checkpoints (``checkpoint_every_s``). The training
step that carries an epoch's last gradients also asks for the evaluation embeddings, and there
for the party's state (``StepRequest.snapshot``); before applying anything, the party writes
the state it holds at that moment (the state the server checkpoints,
:mod:`vflfs.strategies.checkpoint`) to ``party-<partition-id>/<nonce>-<steps>.state``. The
name stamps the setup's nonce (one per setup message: another run, or an earlier model of this
one, has another) and the number of gradient steps taken. The newest two files are kept: the
server's last complete checkpoint is always one of them.

On resume the server names the nonce and step it checkpointed (``query.resume``); the party
loads exactly that state into ``context.state`` or refuses, saying what it holds instead. A
snapshot holds every record of the party's state (:data:`~.party_store.RECORDS`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from flwr.app import Context, RecordDict
from flwr.common.serde import recorddict_from_proto, recorddict_to_proto
from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict

from .party_store import PartyStore

NODE_KEY = "state-dir"  # node config: this party's own folder
RUN_KEY = "party-state-dir"  # run config: a folder for every party (local engine, simulation)
SUFFIX = ".state"
KEEP = 2


class SavedStateMismatch(RuntimeError):
    """The state on this party's disk is not the one the server resumes from."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.public = message  # nothing private: nonces, step counts and the fix


def folder(context: Context) -> Path | None:
    """This party's state folder, or None when it keeps its state in memory only."""
    base = context.node_config.get(NODE_KEY) or context.run_config.get(RUN_KEY)
    if not base or not str(base).strip():
        return None
    partition = int(context.node_config.get("partition-id", 0))
    return Path(str(base)).expanduser() / f"party-{partition}"


def file_name(nonce: str, steps: int) -> str:
    return f"{nonce}-{steps:09d}{SUFFIX}"


def write_snapshot(store: PartyStore) -> Path | None:
    """Write the party state stored in ``context.state`` to this party's folder (if it has
    one)."""
    where, current = folder(store.context), store.stamp()
    if where is None or current is None:
        return None
    where.mkdir(parents=True, exist_ok=True)
    records = store.records()
    path = where / file_name(*current)
    fd, tmp = tempfile.mkstemp(dir=where, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(recorddict_to_proto(records).SerializeToString())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    for old in saved(where)[KEEP:]:
        old.unlink(missing_ok=True)
    return path


def saved(where: Path) -> list[Path]:
    """The snapshots in ``where``, newest first."""
    files = [p for p in where.glob(f"*{SUFFIX}") if p.is_file()]
    return sorted(files, key=lambda p: p.stat().st_mtime_ns, reverse=True)


def read_snapshot(context: Context, nonce: str, steps: int) -> RecordDict:
    """The records of the snapshot (``nonce``, ``steps``), or raise
    :class:`SavedStateMismatch` naming what this party holds instead."""
    partition = context.node_config.get("partition-id", "?")
    where = folder(context)
    if where is None:
        raise SavedStateMismatch(
            f"party {partition} keeps no state on disk, so it cannot resume; fix: start its "
            f"SuperNode with --node-config \"... {NODE_KEY}='/abs/folder'\" (for this run: "
            "rerun=true to start afresh)"
        )
    path = where / file_name(nonce, steps)
    if not path.exists():
        raise SavedStateMismatch(f"party {partition}: {_mismatch(where, nonce, steps)}")
    proto = ProtoRecordDict()
    proto.ParseFromString(path.read_bytes())
    return recorddict_from_proto(proto)


def _mismatch(where: Path, nonce: str, steps: int) -> str:
    """Why no snapshot matches: none, another run's, or this run's at another step."""
    held = [p.name[: -len(SUFFIX)].rsplit("-", 1) for p in saved(where)]
    wanted = f"the server resumes run state {nonce[:8]} at step {steps}"
    fix = "fix: rerun=true to start afresh"
    if not held:
        return f"no saved state in its state folder; {wanted}; {fix}"
    mine = sorted(int(s) for n, s in held if n == nonce)
    if not mine:
        others = ", ".join(sorted({n[:8] for n, _ in held}))
        return (
            f"its saved state belongs to another run (state {others}); {wanted}; {fix}, or "
            "point the party at that run's state folder"
        )
    relation = "older" if max(mine) < steps else "at other steps"
    return (
        f"its saved state of this run is {relation} (steps {', '.join(map(str, mine))}); "
        f"{wanted}; {fix}"
    )
