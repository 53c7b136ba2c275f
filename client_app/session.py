"""What an operation sees while it serves one message: the node's context and its party."""

from __future__ import annotations

import numpy as np
from flwr.app import Context

from . import state
from .party import Party


class Session:
    """One message's view of the party: restore on first use, save if changed."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self._party: Party | None = None
        self._spec: dict | None = None
        self._nonce = ""
        self._rows: dict[str, np.ndarray] | None = None
        self.changed = False

    @property
    def partition_id(self) -> int:
        return int(self.context.node_config.get("partition-id", 0))

    @property
    def num_partitions(self) -> int:
        return int(self.context.node_config.get("num-partitions", 1))

    @property
    def party(self) -> Party:
        if self._party is None:
            self._party, self._spec, self._nonce = state.restore(self.context)
        return self._party

    @property
    def spec(self) -> dict:
        _ = self.party
        return self._spec

    def create(self, spec: dict, nonce: str, rows: dict[str, np.ndarray]) -> Party:
        """Build a fresh party (a setup message); it is saved when the operation ends."""
        self._party = state.build_party(spec, rows)
        self._spec, self._nonce, self._rows = spec, nonce, rows
        self.changed = True
        return self._party

    def save(self) -> None:
        if self.changed and self._party is not None:
            state.save(self.context, self._party, self._spec, self._nonce, self._rows)

    def discard(self) -> None:
        """Forget the live party after a failure, so the next message restores saved state."""
        state.forget(self.context)
