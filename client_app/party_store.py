"""The party's store: everything a party keeps in Flower's ``context.state``, written by part.

``context.state`` is the source of truth: it is correct with several Ray actors and with a
fresh process per message. The cache keeps the live :class:`Party` of this process and is used
only when its version equals the version stored in ``context.state``; otherwise the party is
rebuilt from ``context.state`` (spec section 3).

The party's records in ``context.state``:

* ``vflfs.meta``: the setup's nonce, the version (one more at every save) and the gradient
  steps taken, rewritten at every save;
* ``vflfs.spec``: the setup instructions as JSON, written at setup and when an operation
  changes them (a regularisation path's penalty, the end of a group-lasso phase);
* ``vflfs.rows``: the server's training and evaluation rows, written at setup, one bit per row
  (:mod:`.row_sets`);
* ``vflfs.model``, ``vflfs.optim``, ``vflfs.pending`` (the batches whose gradients are due),
  ``vflfs.structure`` (the features and components in use): one flat record each
  (:mod:`.flat_record`).

An operation marks the parts it changed (:meth:`PartyStore.mark`); a save writes those and the
meta and leaves the other records as they are: a training step rewrites the model, optimiser
and pending batches, never the spec, rows or structure. A part's record is refilled in place
(its one buffer replaced) and the meta's values set in place: Flower's record objects cost
more to make than the bytes of a MADELON-size party's model. Operations keep their own records
(the alignment's, the secure layer's, the scoring phases') through :meth:`PartyStore.put`.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, RecordDict

from vflfs.federation.payload import from_array, to_array
from vflfs.protocol import SETUP

from .data import party_data
from .flat_record import pack, unpack
from .party import Party, PartySpec
from .party_state import STATE_GROUPS
from .row_sets import pack_rows, unpack_rows

META = "vflfs.meta"
SPEC = "vflfs.spec"
ROWS = "vflfs.rows"
PARTS = (*STATE_GROUPS, "spec")
"""What an operation can mark changed."""
RECORDS = (META, SPEC, ROWS, *(f"vflfs.{g}" for g in STATE_GROUPS))
"""The records that hold a party's whole state (what a snapshot on disk holds)."""


class PartyNotReady(RuntimeError):
    """An operation needs a party that was never set up in this run."""


@dataclass(frozen=True)
class Cached:
    """A live party, the stored version it equals, and its parsed setup instructions."""

    nonce: str
    version: int
    party: Party
    spec: dict


class PartyCache:
    """At most ``size`` live parties of this process (or the run's parties, when more), the
    least recently used leaving first.

    The parties of one run only: a party of a new run makes every other run's leave (in a
    sweep of ``engine=local`` jobs, each job's parties go with it). An entry whose version is
    not the stored one is dropped when found.
    """

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[int, int], Cached] = OrderedDict()

    def get(self, key: tuple[int, int], nonce: str, version: int) -> Cached | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.nonce != nonce or entry.version != version:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry

    def put(self, key: tuple[int, int], entry: Cached, parties: int = 1) -> None:
        """Cache ``entry``; ``parties``: how many the run has (all of them may live here, as
        under ``engine=local``, and a smaller cache would rebuild a party on every message)."""
        for other in [k for k in self._entries if k[0] != key[0]]:
            del self._entries[other]
        self._entries[key] = entry
        self._entries.move_to_end(key)
        limit = max(self.size, parties) if self.size > 0 else 0  # size 0: no cache at all
        while len(self._entries) > limit:
            self._entries.popitem(last=False)

    def drop(self, key: tuple[int, int]) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def __iter__(self) -> Iterator[tuple[int, int]]:
        """The keys (run id, node id), least recently used first."""
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)


CACHE = PartyCache()


def build_party(spec: dict, rows: dict[str, np.ndarray], parties: int = 1) -> Party:
    """A fresh party from its setup instructions and the server's row sets (train, eval);
    ``parties``: how many the run has (the data cache keeps a view for each)."""
    train = rows["train"]
    party = Party(PartySpec.from_dict(spec), party_data(spec["data"], train, parties), train)
    party.eval_rows = rows.get("eval", np.zeros(0, np.int64))
    return party


class PartyStore:
    """One message's access to the node's ``context.state``: the party, and the operations'
    own records."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.key = (context.run_id, context.node_id)
        self.parties = int(context.node_config.get("num-partitions", 1))
        self.party: Party | None = None
        self.spec: dict | None = None
        self.nonce = ""
        self._rows: dict[str, np.ndarray] | None = None
        self._changed: set[str] = set()

    # -- the party ----------------------------------------------------------------------------
    def load(self) -> Party:
        """The party of this node: the cached one if it is current, else rebuilt."""
        if self.party is None:
            entry = self._restore()
            self.party, self.spec, self.nonce = entry.party, entry.spec, entry.nonce
        return self.party

    def _restore(self) -> Cached:
        state = self.context.state
        meta = state.get(META)
        if meta is None:
            raise PartyNotReady(
                "this party has not been set up in this run; the server must send "
                f"{SETUP.name!r} before any other operation"
            )
        nonce, version = str(meta["nonce"]), int(meta["version"])
        cached = CACHE.get(self.key, nonce, version)
        if cached is not None:
            return cached
        if SPEC not in state:
            raise ValueError(
                "this party's state has no setup instructions of their own: it was written by "
                "an older vflfs; fix: start the run afresh (rerun=true)"
            )
        spec = json.loads(str(state[SPEC]["json"]))
        rows = {k: unpack_rows(from_array(a)) for k, a in state[ROWS].items()}
        party = build_party(spec, rows, self.parties)
        groups = {g: unpack(state[f"vflfs.{g}"]) for g in STATE_GROUPS}
        party.load_state_arrays(groups, int(meta["steps"]))
        entry = Cached(nonce, version, party, spec)
        CACHE.put(self.key, entry, self.parties)
        return entry

    def create(self, spec: dict, nonce: str, rows: dict[str, np.ndarray]) -> Party:
        """A fresh party (a setup message): all of it is written at the save."""
        self.party = build_party(spec, rows, self.parties)
        self.spec, self.nonce, self._rows = spec, nonce, rows
        self._changed = set(PARTS)
        return self.party

    def mark(self, *parts: str) -> None:
        """Note that the operation changed these parts of the party (of :data:`PARTS`)."""
        unknown = sorted(set(parts) - set(PARTS))
        if unknown:
            raise ValueError(f"unknown party state parts {unknown}; the parts are {PARTS}")
        self._changed.update(parts)

    @property
    def changed(self) -> frozenset[str]:
        return frozenset(self._changed)

    def save(self) -> None:
        """Write the marked parts and a new version; cache the party at that version."""
        if not self._changed or self.party is None:
            return
        state, party = self.context.state, self.party
        if "spec" in self._changed:
            state[SPEC] = ConfigRecord({"json": json.dumps(self.spec)})
        if self._rows is not None:
            state[ROWS] = ArrayRecord({k: to_array(pack_rows(v)) for k, v in self._rows.items()})
        groups = tuple(g for g in STATE_GROUPS if g in self._changed)
        for group, arrays in party.state_arrays(groups).items():
            name = f"vflfs.{group}"
            held = state.get(name)
            record = pack(arrays, held if isinstance(held, ArrayRecord) else None)
            if record is not held:
                state[name] = record
        meta = state.get(META)
        if meta is None:
            state[META] = meta = ConfigRecord({"nonce": self.nonce, "version": -1})
        version = int(meta["version"]) + 1
        meta["nonce"], meta["version"], meta["steps"] = self.nonce, version, party.steps_taken
        CACHE.put(self.key, Cached(self.nonce, version, party, self.spec), self.parties)
        self._changed.clear()
        self._rows = None

    def forget(self) -> None:
        """Drop the live party (after a failed operation left it half-changed, or after the
        records were replaced): the next message rebuilds it from ``context.state``."""
        CACHE.drop(self.key)
        self.party, self.spec, self._changed = None, None, set()

    # -- whole states (snapshots on disk) ----------------------------------------------------
    def stamp(self) -> tuple[str, int] | None:
        """(nonce, gradient steps taken) of the party state stored, None before setup."""
        meta = self.context.state.get(META)
        return None if meta is None else (str(meta["nonce"]), int(meta["steps"]))

    def records(self) -> RecordDict:
        """The stored records of the party's whole state."""
        state = self.context.state
        return RecordDict({name: state[name] for name in RECORDS if name in state})

    def replace(self, records: RecordDict) -> None:
        """Store another whole party state (a snapshot); the live party is forgotten."""
        for name, record in records.items():
            self.context.state[name] = record
        self.forget()

    # -- the operations' own records ----------------------------------------------------------
    def get(self, name: str) -> ArrayRecord | ConfigRecord | None:
        return self.context.state.get(name)

    def put(self, name: str, record: ArrayRecord | ConfigRecord) -> None:
        if name in RECORDS:
            raise ValueError(f"{name!r} holds the party's own state; keep records elsewhere")
        self.context.state[name] = record

    def drop(self, name: str) -> None:
        if name in self.context.state:
            del self.context.state[name]
