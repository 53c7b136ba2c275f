"""Party operations of the gated strategies (STG, FedSDG-FS)."""

from __future__ import annotations

import numpy as np
import torch

from vflfs.protocol import INIT_GATES, InitGatesReply, InitGatesRequest

from .registry import OPERATIONS
from .session import Session


@OPERATIONS.operation(INIT_GATES)
def init_gates(session: Session, request: InitGatesRequest) -> InitGatesReply:
    """Set the input gates' mu (one value per feature of the party's full set)."""
    party = session.party
    gate = party.model.input_gate
    if gate is None:
        raise ValueError("this party has no input gates; the strategy must enable them at setup")
    mu = np.asarray(request.mu, dtype=np.float32)
    if mu.shape != (party.n_features,):
        raise ValueError(f"expected {party.n_features} gate values, got shape {mu.shape}")
    with torch.no_grad():
        gate.mu.copy_(torch.as_tensor(mu[party.features], device=gate.mu.device))
    session.mark_changed("model")
    return InitGatesReply(open=int((mu[party.features] > 0).sum()))
