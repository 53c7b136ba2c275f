"""The settings of a proximal SGD run (LESS-VFL's local stages, :mod:`.embedding_selection`).

Apart from the stages themselves so that the protocol, which sends these settings to the
parties, imports no torch: a ClientApp process that serves no lasso stage does not load it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from .batches import epoch_batches

STAGE_SEED = 7_919  # offsets the batch order of the local stages from the training epochs'


@dataclass(frozen=True)
class ProxSGD:
    """Settings of one proximal SGD run: SGD at ``lr``, then the prox with tau = lam * prox_lr."""

    lam: float
    lr: float
    prox_lr: float
    epochs: int
    batch_size: int
    seed: int

    def __post_init__(self) -> None:
        if self.lam < 0 or self.lr <= 0 or self.prox_lr < 0 or self.epochs < 0:
            raise ValueError(f"bad proximal SGD settings: {self}")
        if self.batch_size < 1:
            raise ValueError(f"proximal SGD batch_size must be >= 1, got {self.batch_size}")

    @property
    def tau(self) -> float:
        """The prox threshold: a group whose norm is at most tau becomes zero."""
        return self.lam * self.prox_lr

    @classmethod
    def from_dict(cls, d: Mapping) -> ProxSGD:
        return cls(
            float(d["lam"]),
            float(d["lr"]),
            float(d["prox_lr"]),
            int(d["epochs"]),
            int(d["batch_size"]),
            int(d["seed"]),
        )

    def as_dict(self) -> dict:
        return asdict(self)

    def batches(self, n: int, epoch: int) -> list[np.ndarray]:
        """Positions 0..n-1 in this epoch's seeded order, in batches."""
        return epoch_batches(np.arange(n), self.batch_size, self.seed + STAGE_SEED, epoch)
