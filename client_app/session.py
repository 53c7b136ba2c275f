"""What an operation sees while it serves one message: the node's context and its party."""

from __future__ import annotations

import numpy as np
from flwr.app import Context

from .party import Party
from .party_store import PARTS, PartyStore


class Session:
    """One message's view of the party: restored on first use; what the operation marks
    changed is saved when it ends (:class:`~.party_store.PartyStore`)."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.store = PartyStore(context)

    @property
    def partition_id(self) -> int:
        return int(self.context.node_config.get("partition-id", 0))

    @property
    def num_partitions(self) -> int:
        return int(self.context.node_config.get("num-partitions", 1))

    @property
    def party(self) -> Party:
        return self.store.load()

    @property
    def spec(self) -> dict:
        self.store.load()
        return self.store.spec

    @property
    def changed(self) -> bool:
        return bool(self.store.changed)

    @changed.setter
    def changed(self, value: bool) -> None:
        """``True``: every part of the party may have changed (:meth:`mark_changed` names
        the parts, so that only those are written)."""
        if value:
            self.store.mark(*PARTS)

    def mark_changed(self, *parts: str) -> None:
        """The operation changed these parts of the party (``model``, ``optim``, ``pending``,
        ``structure``, ``spec``); only they are written at the save."""
        self.store.mark(*parts)

    def create(self, spec: dict, nonce: str, rows: dict[str, np.ndarray]) -> Party:
        """Build a fresh party (a setup message); it is saved when the operation ends."""
        return self.store.create(spec, nonce, rows)

    def save(self) -> None:
        self.store.save()

    def discard(self) -> None:
        """Forget the live party after a failure, so the next message restores saved state."""
        self.store.forget()
