"""Mini-batch order: a seeded shuffle of the training rows per epoch."""

from __future__ import annotations

from functools import lru_cache

import numpy as np


def epoch_batches(rows: np.ndarray, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The batches of one epoch (the last one may be smaller; read-only views)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = _order(np.asarray(rows, dtype=np.int64).tobytes(), seed, epoch)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


@lru_cache(maxsize=4)
def _order(rows: bytes, seed: int, epoch: int) -> np.ndarray:
    """The epoch's shuffle, kept for the epoch's other steps: a party expands a step's batch
    plan on every message, and a new generator per message was ~2% of a training run."""
    order = np.random.default_rng([seed, epoch]).permutation(np.frombuffer(rows, dtype=np.int64))
    order.setflags(write=False)
    return order


def chunked(items: list, k: int) -> list[list]:
    """Consecutive groups of ``k`` items (the last may be shorter)."""
    if k < 1:
        raise ValueError(f"local_steps must be >= 1, got {k}")
    return [items[i : i + k] for i in range(0, len(items), k)]
