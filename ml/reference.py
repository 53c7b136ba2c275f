"""The same split model trained in one process: the floor and the equivalence reference."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .batches import epoch_batches
from .metrics import score
from .models import (
    BottomModel,
    BottomSpec,
    Task,
    TopModel,
    TopSpec,
    party_seed,
    seeded,
    server_seed,
)
from .optim import make_optimizer


class SplitModel:
    """Bottom models and top model, with one optimiser each, as the VFL engine builds them."""

    def __init__(
        self,
        views: Sequence[np.ndarray],
        task: Task,
        bottom: BottomSpec,
        top: TopSpec,
        optimizer: dict,
        seed: int,
    ) -> None:
        self.task = task
        self.X = [torch.tensor(v) for v in views]
        self.bottoms = [
            seeded(party_seed(seed, m), BottomModel, x.shape[1], bottom)
            for m, x in enumerate(self.X)
        ]
        self.top = seeded(
            server_seed(seed), TopModel, [bottom.embedding_size] * len(views), task.n_out, top
        )
        opt = dict(optimizer)
        name = opt.pop("name", "adam")
        self.optimizers = [make_optimizer(b.parameters(), name, **opt) for b in self.bottoms]
        self.optimizers.append(make_optimizer(self.top.parameters(), name, **opt))

    def step(self, rows: np.ndarray, y: np.ndarray) -> float:
        idx = torch.as_tensor(rows)
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        out = self.top([b(x[idx]) for b, x in zip(self.bottoms, self.X, strict=True)])
        loss = self.task.loss(out, self.task.target(y))
        loss.backward()
        for opt in self.optimizers:
            opt.step()
        return float(loss.detach())

    def evaluate(self, rows: np.ndarray, y: np.ndarray) -> float:
        idx = torch.as_tensor(rows)
        with torch.no_grad():
            for b in self.bottoms:
                b.eval()
            self.top.eval()
            out = self.top([b(x[idx]) for b, x in zip(self.bottoms, self.X, strict=True)])
            for b in self.bottoms:
                b.train()
            self.top.train()
        return score(self.task, out, y)

    def fit(
        self, train_rows: np.ndarray, y: np.ndarray, epochs: int, batch_size: int, seed: int
    ) -> list[float]:
        """Train for ``epochs``; returns the loss of every step."""
        losses = []
        for epoch in range(epochs):
            for rows in epoch_batches(train_rows, batch_size, seed, epoch):
                losses.append(self.step(rows, y[rows]))
        return losses
