"""A party's model: optional input gates -> bottom MLP -> optional embedding gates.

Features and embedding components can be removed for good (:meth:`PartyModel.keep_inputs`,
:meth:`PartyModel.keep_outputs`): the layers shrink, so removed columns are no longer computed
or sent.
"""

from __future__ import annotations

import torch
from torch import nn

from .gates import GaussianGate
from .models import BottomModel, BottomSpec


def _gate(n: int, spec: dict | None) -> GaussianGate | None:
    if not spec:
        return None
    init = spec.get("init")
    return GaussianGate(
        n,
        sigma=float(spec.get("sigma", 1.0)),
        lam=float(spec.get("lam", 0.1)),
        init=None if init is None else torch.as_tensor(init, dtype=torch.float32),
        reduce=str(spec.get("reduce", "mean")),
    )


class PartyModel(nn.Module):
    """Bottom model h_m with the gates FedSDG-FS puts around it (spec section 4)."""

    def __init__(
        self,
        d_in: int,
        bottom: BottomSpec,
        input_gate: dict | None = None,
        embedding_gate: dict | None = None,
    ) -> None:
        super().__init__()
        self.input_gate = _gate(d_in, input_gate)
        self.bottom = BottomModel(d_in, bottom)
        self.embedding_gate = _gate(bottom.embedding_size, embedding_gate)

    @property
    def input_layer(self) -> nn.Linear:
        return self.bottom.input_layer

    @property
    def output_layer(self) -> nn.Linear:
        return [m for m in self.bottom.net if isinstance(m, nn.Linear)][-1]

    @property
    def embedding_size(self) -> int:
        return self.output_layer.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.input_gate is not None:
            x = self.input_gate(x)
        h = self.bottom(x)
        if self.embedding_gate is not None:
            h = self.embedding_gate(h)
        return h

    def penalty(self) -> torch.Tensor | None:
        """The gates' regulariser (None without gates)."""
        terms = [g.penalty() for g in (self.input_gate, self.embedding_gate) if g is not None]
        return sum(terms) if terms else None

    @torch.no_grad()
    def project_gates(self) -> None:
        """Keep every gate's mu in [-1, 1] after a step (see :meth:`GaussianGate.project`)."""
        for gate in (self.input_gate, self.embedding_gate):
            if gate is not None:
                gate.project()

    @torch.no_grad()
    def keep_inputs(self, index: torch.Tensor) -> None:
        """Keep only the input features at ``index`` (the input layer loses the other columns)."""
        layer = self.input_layer
        layer.weight = nn.Parameter(layer.weight[:, index].clone())
        layer.in_features = len(index)
        if self.input_gate is not None:
            self.input_gate.keep(index)

    @torch.no_grad()
    def fresh_inputs(self, built_for: int) -> None:
        """Draw the input layer as one built on its kept columns alone, after
        :meth:`keep_inputs` cut it from a layer built for ``built_for`` columns.

        torch draws a Linear layer's weight and bias uniformly within 1/sqrt(fan-in); the kept
        columns of the wider layer, and its bias, scaled by sqrt(built_for / kept), are so drawn
        for the kept fan-in. A refit's or a kept count's model (a party set up with a ``keep``
        instruction) then starts as a model built on those columns does, as the
        relevant-columns oracle's does, and not at the scale of every column of the party: a
        party of 167 of real MADELON's columns keeping 3 drew them within 0.077, not 0.58.
        """
        layer = self.input_layer
        kept = layer.in_features
        if 0 < kept < built_for:
            scale = (built_for / kept) ** 0.5
            layer.weight.mul_(scale)
            if layer.bias is not None:
                layer.bias.mul_(scale)

    @torch.no_grad()
    def keep_outputs(self, index: torch.Tensor) -> None:
        """Keep only the embedding components at ``index`` (the output layer loses rows)."""
        layer = self.output_layer
        layer.weight = nn.Parameter(layer.weight[index].clone())
        layer.bias = nn.Parameter(layer.bias[index].clone())
        layer.out_features = len(index)
        if self.embedding_gate is not None:
            self.embedding_gate.keep(index)
