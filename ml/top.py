"""The server's side of a VFL step: top-model loss, update, and embedding gradients."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .metrics import score
from .models import Task, TopModel, TopSpec, seeded, server_seed
from .optim import make_optimizer


class ServerModel:
    """The top model and its optimiser, fed with the parties' embeddings."""

    def __init__(
        self,
        task: Task,
        embedding_sizes: Sequence[int],
        spec: TopSpec,
        optimizer: dict,
        seed: int,
        device: torch.device,
    ) -> None:
        self.task = task
        self.device = device
        self.model = seeded(server_seed(seed), TopModel, embedding_sizes, task.n_out, spec).to(
            device
        )
        opt = dict(optimizer)
        self.optimizer = make_optimizer(self.model.parameters(), opt.pop("name", "adam"), **opt)

    def _inputs(self, embeddings: Sequence[np.ndarray], grad: bool) -> list[torch.Tensor]:
        return [
            torch.tensor(np.asarray(e), device=self.device).requires_grad_(grad) for e in embeddings
        ]

    def step(self, embeddings: Sequence[np.ndarray], y: np.ndarray) -> tuple[float, list]:
        """One top-model step; returns the loss and dL/dg_m for each party's embedding."""
        inputs = self._inputs(embeddings, grad=True)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.task.loss(self.model(inputs), self.task.target(y).to(self.device))
        loss.backward()
        self.after_backward()
        self.optimizer.step()
        self.after_step()
        return float(loss.detach()), [e.grad.cpu().numpy() for e in inputs]

    def after_backward(self) -> None:
        """Hook for a regulariser's gradient (none by default)."""

    def after_step(self) -> None:
        """Hook for a proximal step (none by default)."""

    def evaluate(self, embeddings: Sequence[np.ndarray], y: np.ndarray) -> tuple[float, float]:
        """Loss and metric (accuracy or R^2) of the top model on given embeddings."""
        self.model.eval()
        with torch.no_grad():
            out = self.model(self._inputs(embeddings, grad=False))
            loss = float(self.task.loss(out, self.task.target(y).to(self.device)))
        self.model.train()
        return loss, score(self.task, out, y)
