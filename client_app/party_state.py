"""A party's learning state as arrays, what Flower's ``context.state`` stores between messages.

The state has four groups (:data:`STATE_GROUPS`), each stored apart (:mod:`.party_store`): the
bottom model's parameters and buffers, the optimiser's state, the batches whose gradients are
still due, and which features and embedding components are in use.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from vflfs.ml.flat_state import Flat, FlatState
from vflfs.ml.optim import load_optimizer_arrays, optimizer_arrays

from .flat_record import Buffer

STATE_GROUPS = ("model", "optim", "pending", "structure")
"""The parts of a party's learning state, each stored apart (:mod:`.party_store`)."""


class PartyState:
    """The state of a :class:`~vflfs.client_app.party.Party` as arrays, and back (the party
    provides the attributes below and ``keep``, which cuts its model to features and
    components)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    features: np.ndarray
    components: np.ndarray
    pending: list[np.ndarray]
    pending_seeds: list[int]
    pending_open: list[np.ndarray | None]
    pending_sent: list[np.ndarray]
    steps_taken: int
    _flat: FlatState

    def state_arrays(
        self, groups: tuple[str, ...] = STATE_GROUPS
    ) -> dict[str, Mapping[str, np.ndarray]]:
        """The arrays of each of ``groups`` (:data:`STATE_GROUPS`; views of the live model's
        and optimiser's buffers: copy them before the next step); the step counter is apart
        (:attr:`steps_taken`)."""
        return {group: getattr(self, f"_{group}_arrays")() for group in groups}

    def _model_arrays(self) -> Mapping[str, np.ndarray]:
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        flat = self._flat.model(self.model, params)
        if flat is None:
            return {k: v.numpy(force=True) for k, v in self.model.state_dict().items()}
        return _buffer(flat)

    def _optim_arrays(self) -> Mapping[str, np.ndarray]:
        flat = self._flat.optim(self.optimizer)
        return optimizer_arrays(self.optimizer) if flat is None else _buffer(flat)

    def _pending_arrays(self) -> dict[str, np.ndarray]:
        """Per pending batch its size and seed (``batches``, 2 x n), their rows back to back,
        the embedding-gate masks they sent (none without gates) and, with K > 1, the
        embeddings they sent, row by row (``sent``)."""
        batches = np.array([[len(r) for r in self.pending], self.pending_seeds], np.int64)
        rows = np.concatenate(self.pending) if self.pending else np.zeros(0, np.int64)
        out = {"batches": batches.reshape(2, -1), "rows": rows.astype(np.int64, copy=False)}
        if self.pending_open and self.pending_open[0] is not None:
            out["open"] = np.stack(self.pending_open).astype(bool, copy=False)
        if self.pending_sent:
            out["sent"] = np.concatenate(self.pending_sent)
        return out

    def _structure_arrays(self) -> dict[str, np.ndarray]:
        return {"features": self.features, "components": self.components}

    def load_state_arrays(self, arrays: dict[str, dict[str, np.ndarray]], steps: int) -> None:
        """Take the state of :meth:`state_arrays` (every group) and the step counter."""
        structure = arrays["structure"]
        features, components = structure["features"], structure["components"]
        if len(features) < len(self.features) or len(components) < len(self.components):
            self.keep(features, components)
        self.model.load_state_dict(
            {k: torch.from_numpy(np.array(v)) for k, v in arrays["model"].items()}
        )
        load_optimizer_arrays(self.optimizer, arrays["optim"])
        pending = arrays["pending"]
        rows = np.array(pending["rows"], dtype=np.int64)
        sizes, seeds = pending["batches"]
        self.pending = np.split(rows, np.cumsum(sizes)[:-1]) if len(sizes) else []
        self.pending_seeds = [int(x) for x in seeds]
        masks = pending.get("open")
        if masks is not None and len(masks) == len(self.pending):
            self.pending_open = [np.array(m, dtype=bool) for m in masks]
        else:
            self.pending_open = [None] * len(self.pending)
        sent = pending.get("sent")
        splits = np.cumsum(sizes)[:-1]
        self.pending_sent = [] if sent is None else list(np.split(np.array(sent), splits))
        self.steps_taken = int(steps)


def _buffer(flat: Flat) -> Buffer:
    """The flat tensors as numpy arrays (views on CPU, one copy from another device)."""
    return Buffer(flat.layout, flat.buffer.numpy(force=True))
