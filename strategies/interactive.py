"""The interactive layer: how the parties' embeddings reach the top model's head, and their
gradients go back (spec sections 3 and 4).

:class:`VFL <vflfs.strategies.vfl.VFL>` trains through one :class:`InteractiveLayer` and never
asks which one: :class:`PlainLayer` (``secure=none``: embeddings up, gradients down,
the server computes the layer) or :class:`~vflfs.strategies.secure_layer.SecureLayer`
(``plaintext`` / ``paillier``: the split-weight protocol). Per batch a layer turns the step
replies into the head's input ``z``; the top model steps on it
(:meth:`~vflfs.ml.top.ServerModel.head_step`, the same for both, with the server's prox),
and the layer's :class:`Pass` then yields each party's gradient message.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import torch

from vflfs.federation import Federation
from vflfs.ml.components import full_width
from vflfs.ml.stale_gradients import curvature_along_gradient
from vflfs.ml.top import ServerModel
from vflfs.protocol import STEP, BatchPlan, Body, Operation
from vflfs.server_app.experiment import Experiment

from .settings import SecureConfig


class Pass(ABC):
    """One training batch through the layer: the head's input ``z`` and, after the top
    model's step, each party's gradient message."""

    z: torch.Tensor
    uploaded = 0  # embedding floats the parties uploaded in the clear for this batch

    def update(self) -> None:
        """The layer's own weight update, after the top model's optimiser step (none: the
        optimiser moves the plain layer with the rest of the model)."""
        return None

    @abstractmethod
    def gradients(self) -> list[np.ndarray]:
        """Per party, what goes down with its next step request."""

    def curvature(self, server: ServerModel, y: np.ndarray) -> list[float]:
        """Per party, the batch loss's curvature along its embedding gradient, at the top
        model's state now (:mod:`vflfs.ml.stale_gradients`; K > 1 local steps)."""
        raise NotImplementedError(f"{type(self).__name__} needs training.local_steps=1")


class InteractiveLayer(ABC):
    """Both sides' part of the interactive layer; the server's weights live in the top model
    (``server.model.interactive``)."""

    step_operation: Operation

    def __init__(self, server: ServerModel) -> None:
        self.server = server
        # Parties with no embedding component (``VFL.widths`` 0): they send nothing, so a
        # layer that can leave them out of the training batches sends them only the epochs'
        # evaluation requests (their selection, and the checkpoints' snapshots).
        self.idle: frozenset[int] = frozenset()

    def exchange(
        self,
        federation: Federation,
        grads: list[list[np.ndarray]],
        plan: BatchPlan | None,
        evaluate: bool,
        curvature: list[np.ndarray] | None = None,
        snapshot: bool = False,
    ) -> dict[int, Body]:
        """One round-trip: the last gradients go down with the next batches' plan (and, at an
        epoch boundary, the evaluation request, and with ``snapshot`` the request to save the
        party's state for a checkpoint); embeddings come back. With K > 1 local steps each
        party's gradients travel with their ``curvature``."""
        op = self.step_operation
        extra = [{}] * len(grads) if curvature is None else [{"curvature": c} for c in curvature]
        if evaluate:  # true or false: the same bytes whenever the run checkpoints
            extra = [{**e, "snapshot": snapshot} for e in extra]
        requests = {
            m: op.request(grads=g, plan=plan, evaluate=evaluate, **extra[m])
            for m, g in enumerate(grads)
            if m not in self.idle
        }
        if evaluate:  # an idle party: no batch, no gradient; its selection and snapshot
            requests |= {m: op.request(evaluate=True, snapshot=snapshot) for m in self.idle}
        return federation.send(op, dict(sorted(requests.items())))

    def leave_out(self, widths: list[int]) -> None:
        """Leave the parties of no embedding component (``widths`` 0) out of the training
        batches; a layer that cannot (the secure one) sends to every party."""
        self.idle = frozenset()

    @abstractmethod
    def forward(self, replies: dict[int, Body], k: int, rows: int) -> Pass:
        """Batch ``k`` of the step replies (``rows`` rows) through the layer."""

    @abstractmethod
    def evaluation(self, replies: dict[int, Body], rows: int) -> tuple[list[np.ndarray], int]:
        """Per party, its part of the evaluation rows (``rows`` in all) that
        :meth:`head_input` combines, and the bytes the parties sent for them."""

    @abstractmethod
    def head_input(self, parts: list[np.ndarray]) -> torch.Tensor:
        """The head's input ``z`` from slices of :meth:`evaluation`'s parts (no gradient)."""


class PlainLayer(InteractiveLayer):
    """The parties send their embeddings; the server computes the layer in its top model."""

    step_operation = STEP

    def width(self, m: int) -> int:
        return int(self.server.model.interactive[m].in_features)

    def leave_out(self, widths: list[int]) -> None:
        self.idle = frozenset(m for m, w in enumerate(widths) if w == 0)

    def forward(self, replies: dict[int, Body], k: int, rows: int) -> Pass:
        parties = range(len(self.server.model.interactive))
        sent = {m: r for m, r in replies.items() if m not in self.idle}  # an idle one: (rows, 0)
        masks = [
            sent[m].open[k] if m in sent and sent[m].open is not None else None for m in parties
        ]
        embeddings = [
            full_width(sent[m].embeddings[k], masks[m], self.width(m))
            if m in sent
            else np.zeros((rows, 0), np.float32)
            for m in parties
        ]
        inputs = self.server.tensors(embeddings, grad=True)
        self.server.training_mode()
        batch = PlainPass(self.server.model.interact(inputs), inputs, masks)
        batch.uploaded = sum(int(np.size(r.embeddings[k])) for r in sent.values())
        return batch

    def evaluation(self, replies: dict[int, Body], rows: int) -> tuple[list[np.ndarray], int]:
        parts = [
            full_width(r.eval_embeddings, r.eval_open, self.width(m)) for m, r in replies.items()
        ]
        return parts, sum(int(r.eval_embeddings.nbytes) for r in replies.values())

    def head_input(self, parts: list[np.ndarray]) -> torch.Tensor:
        with torch.no_grad():
            return self.server.model.interact(self.server.tensors(parts, grad=False))


class PlainPass(Pass):
    def __init__(
        self, z: torch.Tensor, inputs: list[torch.Tensor], masks: list[np.ndarray | None]
    ) -> None:
        self.z, self.inputs, self.masks = z, inputs, masks

    def curvature(self, server: ServerModel, y: np.ndarray) -> list[float]:
        return curvature_along_gradient(lambda e: server.loss(e, y), self.inputs, self.masks)

    def gradients(self) -> list[np.ndarray]:
        """dL/dg_m of the components each party sent."""
        out = []
        for e, mask in zip(self.inputs, self.masks, strict=True):
            g = e.grad.cpu().numpy()
            out.append(g if mask is None else g[:, mask])
        return out


def make_layer(
    secure: SecureConfig, federation: Federation, experiment: Experiment, server: ServerModel
) -> InteractiveLayer:
    """The interactive layer of ``secure.mode`` (``none``: :class:`PlainLayer`)."""
    if not secure.enabled:
        return PlainLayer(server)
    from .secure_layer import SecureLayer

    return SecureLayer(secure, federation, experiment, server)
