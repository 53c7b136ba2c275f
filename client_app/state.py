"""Party state in Flower's ``context.state``, with a guarded in-process cache.

``context.state`` is the source of truth: it is correct with several Ray actors and with a
fresh process per message. The cache keeps the live :class:`Party` of this process and is used
only when its version equals the version stored in ``context.state``; otherwise the party is
rebuilt from ``context.state`` (spec section 3).
"""

from __future__ import annotations

import json

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context

from vflfs.federation.payload import from_array, to_array
from vflfs.protocol import SETUP

from .data import party_data
from .party import Party, PartySpec

META = "vflfs.meta"
ROWS = "vflfs.rows"
_ARRAY_GROUPS = ("model", "optim", "pending", "structure")
_CACHE: dict[tuple[int, int], tuple[str, int, Party]] = {}


class PartyNotReady(RuntimeError):
    """An operation needs a party that was never set up in this run."""


def build_party(spec: dict, rows: dict[str, np.ndarray]) -> Party:
    """A fresh party from its setup instructions and the server's row sets (train, eval)."""
    train = rows["train"]
    party = Party(PartySpec.from_dict(spec), party_data(spec["data"], train), train)
    party.eval_rows = rows.get("eval", np.zeros(0, np.int64))
    return party


def save(context: Context, party: Party, spec: dict, nonce: str, rows: dict | None = None) -> None:
    """Write the party into ``context.state`` and bump its version."""
    meta = context.state.get(META)
    version = int(meta["version"]) + 1 if meta is not None else 0
    context.state[META] = ConfigRecord(
        {"spec": json.dumps(spec), "nonce": nonce, "version": version}
    )
    if rows is not None:
        context.state[ROWS] = ArrayRecord({k: to_array(v) for k, v in rows.items()})
    for group, arrays in party.state_arrays().items():
        context.state[f"vflfs.{group}"] = ArrayRecord({k: to_array(v) for k, v in arrays.items()})
    _CACHE[(context.run_id, context.node_id)] = (nonce, version, party)


def restore(context: Context) -> tuple[Party, dict, str]:
    """The party of this node: from the cache if it is current, else from ``context.state``."""
    meta = context.state.get(META)
    if meta is None:
        raise PartyNotReady(
            "this party has not been set up in this run; the server must send "
            f"{SETUP.name!r} "
            "before any other operation"
        )
    nonce, version = str(meta["nonce"]), int(meta["version"])
    spec = json.loads(str(meta["spec"]))
    cached = _CACHE.get((context.run_id, context.node_id))
    if cached is not None and cached[0] == nonce and cached[1] == version:
        return cached[2], spec, nonce
    party = build_party(spec, {k: from_array(a) for k, a in context.state[ROWS].items()})
    party.load_state_arrays(
        {
            g: {k: from_array(a) for k, a in context.state[f"vflfs.{g}"].items()}
            for g in _ARRAY_GROUPS
        }
    )
    _CACHE[(context.run_id, context.node_id)] = (nonce, version, party)
    return party, spec, nonce


def forget(context: Context) -> None:
    """Drop this node's cached party (after a failed operation left it half-changed)."""
    _CACHE.pop((context.run_id, context.node_id), None)
