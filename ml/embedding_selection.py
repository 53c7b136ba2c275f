"""The local stages of LESS-VFL: proximal SGD with a group lasso, no communication.

Castiglia et al. 2023, "LESS-VFL: Communication-Efficient Feature Selection for Vertical
Federated Learning", ICML, Algorithm 1 (spec section 5):

* stage 2 (:func:`select_components`, at the server): train the top model on the parties' cached
  stage-1 embeddings with proximal SGD, the groups being its input columns (one per embedding
  component of each party); the components whose group stays non-zero are significant
  (along a path of lambdas, chosen on validation: :class:`vflfs.ml.component_path.ComponentPath`);
* stage 3 (:func:`fit_embeddings`, at each party): fit the party's own frozen stage-1 embeddings
  on its significant components, min mean (h(x)_k - h_hat_k)^2, with proximal SGD on the
  input-layer columns; the features whose column is zero are removed.

Every step is an SGD step with learning rate ``lr`` followed by the prox with threshold
tau = ``lam`` * ``prox_lr`` (the official code thresholds with lambda x the VFL learning rate
0.01 in both stages, while stage 3's SGD runs at 0.001).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from .prox import ZERO, column_norms, group_lasso_prox_, nonzero_columns
from .prox_sgd import STAGE_SEED, ProxSGD

# A path point whose fit diverges (a non-finite loss) is fitted again from the last point's
# model at DIVERGED_LR_FACTOR times the step, at most DIVERGED_RETRIES times.
DIVERGED_RETRIES, DIVERGED_LR_FACTOR = 4, 0.1

if TYPE_CHECKING:
    from .top import ServerModel


def select_components(
    server: ServerModel, embeddings: list[np.ndarray], y: np.ndarray, p: ProxSGD
) -> tuple[list[np.ndarray], list[float]]:
    """Stage 2: P-SGD of the top model on cached embeddings (rows aligned with ``y``).

    Returns, per party, the positions of its significant components (non-zero input columns
    of the top model), and the mean loss of every epoch.
    """
    model = server.model
    inputs = [torch.tensor(np.asarray(e), device=server.device) for e in embeddings]
    target = server.task.target(y).to(server.device)

    def loss_of(idx: torch.Tensor) -> torch.Tensor:
        return server.task.loss(model([x[idx] for x in inputs]), target[idx])

    losses = prox_sgd(model, server.input_layers, loss_of, len(y), server.device, p)
    keep = [nonzero_columns(layer.weight).cpu().numpy() for layer in server.input_layers]
    return keep, losses


def fit_embeddings(
    model: nn.Module, input_layer: nn.Linear, X: torch.Tensor, targets: torch.Tensor, p: ProxSGD
) -> list[float]:
    """Stage 3: P-SGD of ``model`` towards ``targets`` (its frozen embeddings of the rows of
    ``X`` on the significant components), prox on ``input_layer``'s columns.

    Returns the mean loss of every epoch. With no significant component the party's output
    is unused: every input column is set to zero at once (the official code's prox alone
    would shrink them to zero step by step).
    """
    if targets.shape[1] == 0:
        with torch.no_grad():
            input_layer.weight.zero_()
        return []

    def loss_of(idx: torch.Tensor) -> torch.Tensor:
        return ((model(X[idx]) - targets[idx]) ** 2).mean()

    return prox_sgd(model, [input_layer], loss_of, len(X), X.device, p)


def prox_sgd(
    model: nn.Module,
    layers: list[nn.Linear],
    loss_of: Callable[[torch.Tensor], torch.Tensor],
    n: int,
    device: torch.device | str,
    p: ProxSGD,
) -> list[float]:
    """Proximal SGD: per batch of row positions, an SGD step on ``loss_of(rows)``, then the
    group-lasso prox on every column of ``layers``. Returns the mean loss of every epoch."""
    optimizer = torch.optim.SGD(model.parameters(), lr=p.lr)
    losses: list[float] = []
    model.train()
    for epoch in range(p.epochs):
        total = 0.0
        for rows in p.batches(n, epoch):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_of(torch.tensor(rows, device=device))  # rows may be read-only
            loss.backward()
            optimizer.step()
            for layer in layers:
                group_lasso_prox_(layer.weight, p.tau)
            total += float(loss.detach()) * len(rows)
        losses.append(total / max(n, 1))
    return losses


def snapshot(model: nn.Module) -> dict:
    """A copy of ``model``'s weights."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def fit_embeddings_path(
    model: nn.Module,
    input_layer: nn.Linear,
    X: torch.Tensor,
    targets: torch.Tensor,
    p: ProxSGD,
    points: int = 8,
    tolerance: float = 0.05,
    extend: int = 0,
) -> tuple[list[float], list[dict]]:
    """Stage 3 along a path of lambdas, chosen without labels and without messages.

    The party holds out a seeded fifth of its rows; lambda grows geometrically (x2) from
    ``p.lam / 2^(points - 2)`` to ``2 * p.lam``, each point warm-started from the last with
    ``p.epochs / points`` epochs; with ``extend`` > 0 it goes on doubling, up to that many
    more points, until no column is left (so that every column's leaving point is known for
    :func:`leave_scores`). A point whose fit diverges is fitted again from the last point's
    model at a tenth of the step (kept for the later points; each record holds its ``lr``).
    The chosen point is the sparsest whose held-out R^2 of the
    frozen embeddings is within ``tolerance`` of the best point's; the model returns to it.
    An empty selection is chosen only if no point reconstructs better than the mean (R^2
    <= 0). Returns the losses of every epoch and one record per point; each record holds the
    input-column norms at that point (``norms``), from which :func:`leave_scores` ranks the
    features.
    """
    if targets.shape[1] == 0 or points < 1:
        return fit_embeddings(model, input_layer, X, targets, p), []
    order = np.random.default_rng(p.seed + STAGE_SEED).permutation(len(X))
    held, fit = order[: len(X) // 5], order[len(X) // 5 :]
    held_t = torch.as_tensor(held, device=X.device)
    X_held, y_held = X[held_t], targets[held_t]
    total = float(((y_held - y_held.mean(0)) ** 2).sum()) or 1.0
    epochs = max(1, p.epochs // points)
    losses: list[float] = []
    records: list[dict] = []
    states: list[dict] = []  # each point's model
    last = snapshot(model)  # the model the next point starts from
    X_fit, y_fit = X[torch.as_tensor(fit)], targets[fit]
    lr = p.lr
    for j in range(points + extend):
        if j >= points and records[-1]["kept"] == 0:
            break
        lam = p.lam * 2.0 ** (j - points + 2)
        step = ProxSGD(lam, lr, p.prox_lr, epochs, p.batch_size, p.seed + j)
        fitted, error, lr = _fit_point(
            model, input_layer, (X_fit, y_fit), (X_held, y_held), step, last
        )
        losses += fitted
        norms = column_norms(input_layer.weight).cpu().numpy()
        kept = int(np.count_nonzero(norms > ZERO))
        records.append(
            {"lam": lam, "lr": lr, "r2": 1.0 - error / total, "kept": kept, "norms": norms}
        )
        last = snapshot(model)
        states.append(last)
    _choose_point(model, input_layer, records, states, tolerance)
    return losses, records


def _choose_point(
    model: nn.Module,
    input_layer: nn.Linear,
    records: list[dict],
    states: list[dict],
    tolerance: float,
) -> None:
    """Return ``model`` to the sparsest point whose held-out R^2 is within ``tolerance`` of
    the best (marked ``chosen`` in its record); with no point above R^2 = 0, to no feature."""
    best = max(r["r2"] for r in records)
    if best <= 0.0:
        with torch.no_grad():
            input_layer.weight.zero_()
        return
    good = [j for j, r in enumerate(records) if r["r2"] >= best - tolerance and r["kept"] > 0]
    chosen = min(good, key=lambda j: (records[j]["kept"], -records[j]["r2"]))
    records[chosen]["chosen"] = True
    model.load_state_dict(states[chosen])


def _fit_point(
    model: nn.Module,
    input_layer: nn.Linear,
    train: tuple[torch.Tensor, torch.Tensor],
    held: tuple[torch.Tensor, torch.Tensor],
    step: ProxSGD,
    last: dict,
) -> tuple[list[float], float, float]:
    """One path point: ``step`` on the ``train`` rows (inputs, targets), then the squared
    error on the ``held`` rows; returns the epochs' losses, that error and the step size used.
    A fit that diverges (large embeddings make the step too long) is done again from the last
    point's model (``last``) at a tenth of the step, at most :data:`DIVERGED_RETRIES` times."""
    lr = step.lr
    for _ in range(DIVERGED_RETRIES + 1):
        fitted = fit_embeddings(model, input_layer, *train, replace(step, lr=lr))
        with torch.no_grad():
            model.eval()
            error = float(((model(held[0]) - held[1]) ** 2).sum())
            model.train()
        if np.isfinite(fitted).all() and np.isfinite(error):
            return fitted, error, lr
        model.load_state_dict(last)
        lr *= DIVERGED_LR_FACTOR
    raise FloatingPointError(
        f"stage 3 diverged at every step size down to {lr / DIVERGED_LR_FACTOR:g}; "
        "fix: a smaller strategy.party.lr"
    )


def leave_scores(norms: list[np.ndarray]) -> np.ndarray:
    """Each input column's importance along a path (LassoNet's: the penalty at which it leaves).

    ``norms[j]`` holds the column norms at path point j (lambda growing with j). A column last
    non-zero at point j scores j + 1 + n / (1 + n), n its norm there: a column that stays
    longer outranks any that leaves earlier, and among columns leaving at the same point the
    larger one ranks first. A column zero at every point scores 0. Parties whose paths share
    one lambda grid get comparable scores.
    """
    if not norms:
        return np.zeros(0)
    table = np.stack([np.asarray(n, dtype=np.float64) for n in norms])  # points x columns
    alive = table > ZERO
    last = np.where(alive.any(0), table.shape[0] - 1 - np.argmax(alive[::-1], axis=0), -1)
    at_last = table[np.maximum(last, 0), np.arange(table.shape[1])]
    return np.where(last >= 0, last + 1 + at_last / (1 + at_last), 0.0)
