"""Stale embedding gradients of K local steps, kept valid (spec section 3).

With K > 1 local steps a party applies batch k's gradient g = dL/de after its own first k
steps, so at an embedding e that is no longer the e~ the server differentiated at. Applied as
it is, g keeps pushing e the same way however far e has already moved, and an optimiser that
normalises its steps (Adam) moves the party's weights a full step along it every time: the
party over-corrects, the top model meets embeddings it was not trained on, and the training
loss blows up. The first-order correction of the stale gradient is

    dL/de (e)  ~  g + H (e - e~),

with H the Hessian of the batch loss in the party's embedding. The server measures H along
the gradient, c = g.Hg / g.g (one Hessian-vector product through the top model, at the state
the gradient was computed at) and sends c with g; the party applies g + c (e - e~), which
vanishes once its embedding has made the step the loss asks for and turns back past it. For
a loss quadratic in e with H = c I the corrected gradient is the fresh one.

The server's top model moves at ``lr / sqrt(K)`` during such a round, so that the gradients
it sends (from its state after its first k steps) stay close to what the parties' next
embeddings will meet (:func:`round_learning_rate`). K = 1 uses neither: its batch is applied
at the weights it was embedded with, and the top model keeps its learning rate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch


def curvature_along_gradient(
    loss_of: Callable[[list[torch.Tensor]], torch.Tensor],
    embeddings: Sequence[torch.Tensor],
    masks: Sequence[np.ndarray | None],
) -> list[float]:
    """Per party, c = g.Hg / g.g of the loss ``loss_of(embeddings)``: g its gradient in that
    party's embedding over the components the party sent (``masks``; None: all), H the
    Hessian there. 0 where g is zero."""
    inputs = [e.detach().clone().requires_grad_(True) for e in embeddings]
    grads = torch.autograd.grad(loss_of(inputs), inputs, create_graph=True)
    out = []
    for e, g, mask in zip(inputs, grads, masks, strict=True):
        v = g.detach()
        if mask is not None:
            v = v * torch.tensor(mask, device=v.device, dtype=v.dtype)
        norm = float((v * v).sum())
        if norm == 0.0:
            out.append(0.0)
            continue
        (hv,) = torch.autograd.grad(g, e, grad_outputs=v, retain_graph=True)
        out.append(max(float((v * hv).sum()) / norm, 0.0))
    return out


def corrected_gradient(
    grad: torch.Tensor, fresh: torch.Tensor, stale: torch.Tensor, curvature: float
) -> torch.Tensor:
    """The stale gradient ``grad`` (computed at embedding ``stale``) carried to the party's
    ``fresh`` embedding of the same rows: ``grad + curvature * (fresh - stale)``."""
    return grad + curvature * (fresh.detach() - stale)


@contextmanager
def round_learning_rate(optimizer: torch.optim.Optimizer, k: int) -> Iterator[None]:
    """The optimiser's learning rates divided by sqrt(``k``) while a round of ``k`` local
    steps is trained (unchanged for k = 1), restored afterwards."""
    if k <= 1:
        yield
        return
    rates = [group["lr"] for group in optimizer.param_groups]
    for group in optimizer.param_groups:
        group["lr"] = group["lr"] * k**-0.5
    try:
        yield
    finally:
        for group, lr in zip(optimizer.param_groups, rates, strict=True):
            group["lr"] = lr
