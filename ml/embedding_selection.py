"""The local stages of LESS-VFL: proximal SGD with a group lasso, no communication.

Castiglia et al. 2023, "LESS-VFL: Communication-Efficient Feature Selection for Vertical
Federated Learning", ICML, Algorithm 1 (spec section 5):

* stage 2 (:func:`select_components`, at the server): train the top model on the parties' cached
  stage-1 embeddings with proximal SGD, the groups being its input columns (one per embedding
  component of each party); the components whose group stays non-zero are significant
  (:func:`select_components_path`: along a path of lambdas, chosen on validation);
* stage 3 (:func:`fit_embeddings`, at each party): fit the party's own frozen stage-1 embeddings
  on its significant components, min mean (h(x)_k - h_hat_k)^2, with proximal SGD on the
  input-layer columns; the features whose column is zero are removed.

Every step is an SGD step with learning rate ``lr`` followed by the prox with threshold
tau = ``lam`` * ``prox_lr`` (the official code thresholds with lambda x the VFL learning rate
0.01 in both stages, while stage 3's SGD runs at 0.001).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from .metrics import paired_excess, prior_losses
from .prox import ZERO, column_norms, group_lasso_prox_, nonzero_columns
from .prox_sgd import STAGE_SEED, ProxSGD

if TYPE_CHECKING:
    from .top import Scored, ServerModel

Good = Callable[[list[float], list[np.ndarray]], list[int]]
"""A choice's rule: given each model's validation score and per-sample validation losses, the
indices of the good ones (:func:`vflfs.strategies.path_choice.good_scores`)."""


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


def select_components_path(
    server: ServerModel,
    embeddings: list[np.ndarray],
    y: np.ndarray,
    validation: tuple[list[np.ndarray], np.ndarray],
    p: ProxSGD,
    points: int,
    growth: float,
    good: Good,
    learned: float,
    refine: int = 3,
) -> tuple[list[np.ndarray], list[float], list[dict]]:
    """Stage 2 along a path of lambdas, chosen on the validation rows' cached embeddings.

    Lambda grows from ``p.lam`` by ``growth`` per point, each point warm-started from the last
    with ``p.epochs / points`` epochs of :func:`prox_sgd`, until no component is left or
    ``points`` points. Each point is scored on the validation embeddings (``validation``: per
    party, and the labels) by :func:`refit_score`, its components refit without the penalty:
    scored while shrunk, a point that has just dropped the noise components scored far below
    the denser ones (on a regression set, R^2 0.86 against 0.97 with 5 of 48 components left).

    The choice: the ``good`` point (given each point's validation score and per-sample losses)
    with the fewest components, looked for ``refine`` more times between it and the next point
    with fewer (lambda at their geometric mean, warm-started from it: one doubling can remove
    most components at once). That point decides which parties keep a component: a party of
    pure noise sends none, and its stage 3 keeps no feature. The components kept are those of
    the good point with the most components open at the same parties
    (:meth:`ComponentPath.widest`), and the model returns to that point.

    A top model that learns nothing from the cached embeddings cannot judge them: every
    component is kept, the model back at the first point. Learned means that some point with a
    component scores above ``learned`` (e.g. the majority class's accuracy) and that its
    validation rows' losses beat the constant prediction's
    (:func:`~vflfs.ml.metrics.prior_losses`) by one standard error of the paired differences:
    on a few dozen training rows the top model memorises the cached embeddings, and a point 2
    of 20 validation rows above the majority class, with a loss above the class frequencies',
    had closed every component.

    Returns, per party, the chosen components, the losses of every epoch, and one record per
    point (lambda, validation score and loss, components kept per party), in the order of
    lambda.
    """
    path = ComponentPath(server, embeddings, y, validation, p, max(1, p.epochs // max(points, 1)))
    for j in range(max(points, 1)):
        path.point(p.lam * growth**j, 0 if j == 0 else len(path.records) - 1)
        if not sum(path.records[-1]["kept"]):
            break
    prior = prior_losses(server.task, y, validation[1])

    def learned_at(record: dict, losses: np.ndarray) -> bool:
        excess, se = paired_excess(losses, prior)  # below the prior's by a standard error
        return bool(sum(record["kept"])) and record["val_metric"] > learned and excess + se < 0

    if not any(  # also: the first point closed every component
        learned_at(r, losses) for r, losses in zip(path.records, path.val_losses, strict=True)
    ):
        return (
            path.keep(0, "learned nothing from the cached embeddings"),
            path.losses,
            path.sorted(),
        )
    chosen = path.choose(good)
    for _ in range(refine):  # between the last point as sparse as it and the next sparser
        kept = sum(path.records[chosen]["kept"])
        sparser = [j for j, q in enumerate(path.records) if sum(q["kept"]) < kept]
        if not sparser:
            break
        nxt = min(sparser, key=lambda j: path.records[j]["lam"])
        hi = path.records[nxt]["lam"]
        same = [j for j, q in enumerate(path.records) if sum(q["kept"]) == kept and q["lam"] < hi]
        lo = max(same or [chosen], key=lambda j: path.records[j]["lam"])
        path.point(math.sqrt(path.records[lo]["lam"] * hi), lo)
        chosen = path.choose(good)
    return path.keep(path.widest(chosen, good, refine)), path.losses, path.sorted()


class ComponentPath:
    """The points of stage 2's path: each one's record, and the top model's state there."""

    def __init__(
        self,
        server: ServerModel,
        embeddings: list[np.ndarray],
        y: np.ndarray,
        validation: tuple[list[np.ndarray], np.ndarray],
        p: ProxSGD,
        epochs: int,
    ) -> None:
        self.server, self.y, self.validation, self.p, self.epochs = server, y, validation, p, epochs
        self.inputs = [torch.tensor(np.asarray(e), device=server.device) for e in embeddings]
        self.target = server.task.target(y).to(server.device)
        self.losses: list[float] = []
        self.records: list[dict] = []
        self.val_losses: list[np.ndarray] = []  # per point, each validation row's loss
        self.states: list[tuple[dict, list[np.ndarray]]] = []

    def point(self, lam: float, start: int) -> None:
        """Train at ``lam`` from the state of point ``start`` (the model as it is, for the
        first), then record the point."""
        model, server = self.server.model, self.server
        if self.states:
            model.load_state_dict(self.states[start][0])

        def loss_of(idx: torch.Tensor) -> torch.Tensor:
            return server.task.loss(model([x[idx] for x in self.inputs]), self.target[idx])

        p = self.p
        step = ProxSGD(lam, p.lr, p.prox_lr, self.epochs, p.batch_size, p.seed + len(self.records))
        self.losses += prox_sgd(
            model, server.input_layers, loss_of, len(self.y), server.device, step
        )
        kept = [nonzero_columns(layer.weight).cpu().numpy() for layer in server.input_layers]
        scored = refit_score(server, kept, self.inputs, self.y, self.validation, step)
        self.val_losses.append(scored.losses)
        self.records.append(
            {
                "lam": lam,
                "val_metric": scored.metric,
                "val_loss": scored.loss,
                "kept": [len(k) for k in kept],
            }
        )
        self.states.append(({k: v.detach().clone() for k, v in model.state_dict().items()}, kept))

    def choose(self, good: Good) -> int:
        """The good point with the fewest components."""
        return min(
            self.good(good),
            key=lambda j: (sum(self.records[j]["kept"]), -self.records[j]["val_metric"]),
        )

    def good(self, good: Good) -> list[int]:
        return good([r["val_metric"] for r in self.records], self.val_losses)

    def widest(self, chosen: int, good: Good, refine: int) -> int:
        """The good point with the most components among those open at the same parties as
        ``chosen``, looked for ``refine`` times between it and the next denser point with
        more parties open: the fewest components scored on the pre-trained embeddings need
        not serve the bottom models trained afresh on them."""
        parties = self.open(chosen)
        widest = chosen
        for i in range(refine + 1):
            same = [j for j in {*self.good(good), chosen} if self.open(j) == parties]
            widest = max(  # on ties the smallest lambda: the next bisection moves on
                same,
                key=lambda j: (
                    sum(self.records[j]["kept"]),
                    self.records[j]["val_metric"],
                    -self.records[j]["lam"],
                ),
            )
            lam = self.records[widest]["lam"]
            denser = [
                j for j, r in enumerate(self.records) if r["lam"] < lam and self.open(j) != parties
            ]
            if not denser or i == refine:
                break
            prev = max(denser, key=lambda j: self.records[j]["lam"])
            self.point(math.sqrt(lam * self.records[prev]["lam"]), prev)
        return widest

    def open(self, j: int) -> tuple[bool, ...]:
        """Which parties point ``j`` leaves a component."""
        return tuple(k > 0 for k in self.records[j]["kept"])

    def keep(self, j: int, reason: str | None = None) -> list[np.ndarray]:
        """The model back at point ``j``; its components (every one, with a ``reason``)."""
        state, kept = self.states[j]
        self.server.model.load_state_dict(state)
        self.records[j]["chosen"] = reason or True
        if reason is not None:
            return [np.arange(layer.in_features) for layer in self.server.input_layers]
        return kept

    def sorted(self) -> list[dict]:
        return sorted(self.records, key=lambda r: r["lam"])


def refit_score(
    server: ServerModel,
    kept: list[np.ndarray],
    inputs: list[torch.Tensor],
    y: np.ndarray,
    validation: tuple[list[np.ndarray], np.ndarray],
    p: ProxSGD,
) -> Scored:
    """A path point's validation score without its shrinkage: a copy of the top model cut to
    the ``kept`` components, trained for ``p.epochs`` epochs of the top model's own optimiser
    on the cached embeddings with no penalty; its best epoch's score (the server's model is
    not touched)."""
    refit = copy.deepcopy(server)
    refit.prox_tau = 0.0
    for m, k in enumerate(kept):
        refit.keep_components(m, k)  # also a fresh optimiser over the cut model
    cols = [torch.as_tensor(k, dtype=torch.long, device=server.device) for k in kept]
    train = [x[:, c] for x, c in zip(inputs, cols, strict=True)]
    val = refit.tensors(
        [np.asarray(e)[:, k] for e, k in zip(validation[0], kept, strict=True)], False
    )
    best: Scored | None = None
    for epoch in range(max(p.epochs, 1)):
        for rows in p.batches(len(y), epoch):
            idx = torch.tensor(rows, device=server.device)  # rows may be read-only
            refit.head_step(refit.model.interact([x[idx] for x in train]), y[rows])
        with torch.no_grad():
            scored = refit.evaluate_head(refit.model.interact(val), validation[1])
        if best is None or scored.metric > best.metric:
            best = scored
    assert best is not None
    return best


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
    :func:`leave_scores`). The chosen point is the sparsest whose held-out R^2 of the
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
    total = float(((targets[held_t] - targets[held_t].mean(0)) ** 2).sum()) or 1.0
    epochs = max(1, p.epochs // points)
    losses: list[float] = []
    records: list[dict] = []
    states: list[dict] = []
    for j in range(points + extend):
        if j >= points and records[-1]["kept"] == 0:
            break
        lam = p.lam * 2.0 ** (j - points + 2)
        step = ProxSGD(lam, p.lr, p.prox_lr, epochs, p.batch_size, p.seed + j)
        losses += fit_embeddings(model, input_layer, X[torch.as_tensor(fit)], targets[fit], step)
        with torch.no_grad():
            model.eval()
            error = float(((model(X[held_t]) - targets[held_t]) ** 2).sum())
            model.train()
        norms = column_norms(input_layer.weight).cpu().numpy()
        kept = int(np.count_nonzero(norms > ZERO))
        records.append({"lam": lam, "r2": 1.0 - error / total, "kept": kept, "norms": norms})
        states.append({k: v.detach().clone() for k, v in model.state_dict().items()})
    best = max(r["r2"] for r in records)
    if best <= 0.0:
        with torch.no_grad():
            input_layer.weight.zero_()
        return losses, records
    good = [j for j, r in enumerate(records) if r["r2"] >= best - tolerance and r["kept"] > 0]
    chosen = min(good, key=lambda j: (records[j]["kept"], -records[j]["r2"]))
    records[chosen]["chosen"] = True
    model.load_state_dict(states[chosen])
    return losses, records


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
