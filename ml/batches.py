"""Mini-batch order: a seeded shuffle of the training rows per epoch."""

from __future__ import annotations

import numpy as np


def epoch_batches(rows: np.ndarray, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The batches of one epoch (the last one may be smaller)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = np.random.default_rng([seed, epoch]).permutation(np.asarray(rows, dtype=np.int64))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def chunked(items: list, k: int) -> list[list]:
    """Consecutive groups of ``k`` items (the last may be shorter)."""
    if k < 1:
        raise ValueError(f"local_steps must be >= 1, got {k}")
    return [items[i : i + k] for i in range(0, len(items), k)]
