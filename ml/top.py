"""The server's side of a VFL step: top-model loss, update, and embedding gradients."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import torch

from .devices import as_tensor
from .metrics import score
from .models import Task, TopModel, TopSpec, seeded, server_seed
from .optim import make_optimizer
from .prox import group_lasso_prox_


class Scored(NamedTuple):
    """The top model on an evaluation set: mean loss, metric, and each sample's loss."""

    loss: float
    metric: float
    losses: np.ndarray  # float32, one per sample (what paired comparisons of models need)


class ServerModel:
    """The top model and its optimiser, fed with the parties' embeddings."""

    prox_tau = 0.0  # group lasso on the input columns after every step (tau = lambda * lr)

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
        self.optimizer_spec = dict(optimizer)
        self.reset_optimizer()

    def reset_optimizer(self, optimizer: dict | None = None) -> None:
        """A fresh optimiser (``optimizer``, else the one given at construction)."""
        if optimizer is not None:
            self.optimizer_spec = dict(optimizer)
        opt = dict(self.optimizer_spec)
        self.optimizer = make_optimizer(self.model.parameters(), opt.pop("name", "adam"), **opt)

    @property
    def input_layers(self) -> list[torch.nn.Linear]:
        """The input layer, one linear map per party: column j of party m's map is the group
        of weights leaving embedding component j (group lasso acts on these columns)."""
        return list(self.model.interactive)

    @torch.no_grad()
    def keep_components(self, party: int, index: Sequence[int] | np.ndarray) -> None:
        """Keep only the embedding components at ``index`` (positions in party ``party``'s
        current embedding): its map loses the other columns; the optimiser restarts."""
        layer = self.model.interactive[party]
        cols = torch.as_tensor(np.asarray(index, dtype=np.int64), device=self.device)
        layer.weight = torch.nn.Parameter(layer.weight[:, cols].clone())
        layer.in_features = len(cols)
        self.reset_optimizer()

    def tensors(self, embeddings: Sequence[np.ndarray], grad: bool) -> list[torch.Tensor]:
        """The embeddings as tensors on the model's device (leaves that keep their gradient)."""
        return [as_tensor(e, self.device).requires_grad_(grad) for e in embeddings]

    def step(self, embeddings: Sequence[np.ndarray], y: np.ndarray) -> tuple[float, list]:
        """One top-model step; returns the loss and dL/dg_m for each party's embedding."""
        inputs = self.tensors(embeddings, grad=True)
        self.training_mode()
        loss = self.head_step(self.model.interact(inputs), y)
        return loss, [e.grad.cpu().numpy() for e in inputs]

    def embedding_gradients(self, embeddings: Sequence[np.ndarray], y: np.ndarray) -> list:
        """Per party: the gradient of the loss summed over the rows with respect to each row's
        embedding, the top model in evaluation mode; no step (the path's screening,
        :mod:`vflfs.ml.screening`)."""
        inputs = self.tensors(embeddings, grad=True)
        self.model.eval()
        try:
            out = self.model.head(self.model.interact(inputs))
            target = self.task.target(y).to(self.device)
            self.task.loss(out, target, reduction="sum").backward()
        finally:
            self.model.train()
            self.model.zero_grad(set_to_none=True)
        return [e.grad.cpu().numpy() for e in inputs]

    def loss(self, embeddings: Sequence[torch.Tensor], y: np.ndarray) -> torch.Tensor:
        """The mean training loss of the top model on the parties' embeddings (a graph)."""
        self.training_mode()
        out = self.model.head(self.model.interact(embeddings))
        return self.task.loss(out, self.task.target(y).to(self.device))

    def head_step(
        self, z: torch.Tensor, y: np.ndarray, update: Callable[[], None] | None = None
    ) -> float:
        """One step of the top model from the interactive layer's output ``z``: backward,
        the optimiser's step, the layer's own ``update`` (a layer whose weights the optimiser
        does not move), then :meth:`after_step`. Returns the loss."""
        self.training_mode()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.task.loss(self.model.head(z), self.task.target(y).to(self.device))
        loss.backward()
        self.after_backward()
        self.optimizer.step()
        if update is not None:
            update()
        self.after_step()
        return float(loss.detach())

    def training_mode(self) -> None:
        """The top model in training mode. ``Module.train`` walks every submodule (twice a
        step, about 2% of a run on small models), so it runs only when the model is in
        evaluation mode, where :meth:`evaluate_head` and the screening's gradients leave it
        for their duration only (they switch the whole model)."""
        if not self.model.training:
            self.model.train()

    def after_backward(self) -> None:
        """Hook for a regulariser's gradient (none by default)."""

    def after_step(self) -> None:
        """Hook for a proximal step: group lasso on the input columns when ``prox_tau`` > 0."""
        if self.prox_tau > 0:
            for layer in self.input_layers:
                group_lasso_prox_(layer.weight, self.prox_tau)

    def evaluate(self, embeddings: Sequence[np.ndarray], y: np.ndarray) -> Scored:
        """Loss and metric (accuracy or R^2) of the top model on given embeddings."""
        with torch.no_grad():
            z = self.model.interact(self.tensors(embeddings, grad=False))
        return self.evaluate_head(z, y)

    def evaluate_head(self, z: torch.Tensor, y: np.ndarray) -> Scored:
        """Loss and metric (accuracy or R^2) of the top model from the interactive layer's
        output ``z``."""
        self.model.eval()
        with torch.no_grad():
            out = self.model.head(z)
            target = self.task.target(y).to(self.device)
            losses = self.task.loss(out, target, reduction="none")
        self.model.train()
        # The mean is taken as the mean-reduced loss takes it, so the history is unchanged.
        loss = float(self.task.loss(out, target))
        return Scored(loss, score(self.task, out, y), losses.float().cpu().numpy())
