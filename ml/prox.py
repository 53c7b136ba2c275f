"""Proximal operator of the group lasso on the input columns of a linear layer (spec section 5).

Group j is column ``weight[:, j]`` (all weights leaving input j):
w_j <- max(0, 1 - tau / ||w_j||) w_j with tau = lambda * lr, applied after each optimiser step.
A group whose norm is at most tau becomes exactly zero.
"""

from __future__ import annotations

import torch

ZERO = 1e-8  # a feature whose column norm is at most this is removed


@torch.no_grad()
def group_lasso_prox_(weight: torch.Tensor, tau: float) -> torch.Tensor:
    """Shrink the columns of ``weight`` in place; returns the column norms before shrinking."""
    norms = weight.norm(dim=0)
    scale = torch.clamp(1 - tau / torch.clamp(norms, min=1e-12), min=0.0)
    weight.mul_(scale)
    return norms


def column_norms(weight: torch.Tensor) -> torch.Tensor:
    return weight.detach().norm(dim=0)


def nonzero_columns(weight: torch.Tensor, threshold: float = ZERO) -> torch.Tensor:
    """Indices of the columns whose norm exceeds ``threshold``."""
    return torch.nonzero(column_norms(weight) > threshold).flatten()
