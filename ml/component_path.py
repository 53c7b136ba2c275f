"""Stage 2 of LESS-VFL along a path of lambdas, chosen on validation (spec section 5).

Castiglia et al. 2023, "LESS-VFL: Communication-Efficient Feature Selection for Vertical
Federated Learning", ICML, Algorithm 1, stage 2 (at one lambda:
:func:`vflfs.ml.embedding_selection.select_components`): the server trains its top model on the
parties' cached pre-training embeddings with proximal SGD, one group per embedding component.
Here lambda grows point by point (:class:`ComponentPath`), each point is scored without its
shrinkage (:func:`refit_score`), and the validation rows choose the components the parties keep.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch

from .embedding_selection import prox_sgd, snapshot
from .metrics import paired_excess, prior_losses
from .prox import nonzero_columns
from .prox_sgd import ProxSGD

if TYPE_CHECKING:
    from .top import Scored, ServerModel

Good = Callable[[list[float], list[np.ndarray]], list[int]]
"""A choice's rule: given each model's validation score and per-sample validation losses, the
indices of the good ones (:func:`vflfs.strategies.path_choice.good_scores`)."""


class ComponentPath:
    """Stage 2's path over the cached embeddings (``validation``: per party, and the labels):
    each point's record, and the top model's state there. ``points`` points at most, each
    trained ``p.epochs / points`` epochs of :func:`prox_sgd`; :meth:`select` runs and chooses."""

    def __init__(
        self,
        server: ServerModel,
        embeddings: list[np.ndarray],
        y: np.ndarray,
        validation: tuple[list[np.ndarray], np.ndarray],
        p: ProxSGD,
        points: int,
    ) -> None:
        self.server, self.y, self.validation, self.p = server, y, validation, p
        self.points = max(points, 1)
        self.epochs = max(1, p.epochs // self.points)
        self.inputs = [torch.tensor(np.asarray(e), device=server.device) for e in embeddings]
        self.target = server.task.target(y).to(server.device)
        self.losses: list[float] = []
        self.records: list[dict] = []
        self.val_losses: list[np.ndarray] = []  # per point, each validation row's loss
        self.lowest_losses: list[np.ndarray] = []  # the same where their mean was lowest
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
        scored, lowest = refit_score(server, kept, self.inputs, self.y, self.validation, step)
        self.val_losses.append(scored.losses)
        self.lowest_losses.append(lowest.losses)
        self.records.append(
            {
                "lam": lam,
                "val_metric": scored.metric,
                "val_loss": scored.loss,
                "lowest_val_loss": lowest.loss,  # what the learned test reads (:meth:`learned`)
                "kept": [len(k) for k in kept],
            }
        )
        self.states.append((snapshot(model), kept))

    def select(
        self, growth: float, good: Good, learned: float, refine: int = 3
    ) -> tuple[list[np.ndarray], list[float], list[dict]]:
        """Stage 2 along a path of lambdas, chosen on the validation rows' cached embeddings.

        Lambda grows from ``p.lam`` by ``growth`` per point (:meth:`run`), until no component
        is left or ``points`` points. Each point is scored on the validation embeddings by
        :func:`refit_score`, its components refit without the penalty: scored while shrunk, a
        point that has just dropped the noise components scored far below the denser ones (on a
        regression set, R^2 0.86 against 0.97 with 5 of 48 components left).

        The choice: the ``good`` point (given each point's validation score and per-sample
        losses) with the fewest components, looked for ``refine`` more times between it and the
        next point with fewer (:meth:`refine`: one doubling can remove most components at
        once). That point decides which parties keep a component: a party of pure noise sends
        none, and its stage 3 keeps no feature. The components kept are those of the good point
        with the most components open at the same parties (:meth:`widest`), and the model
        returns to that point.

        A top model that learns nothing from the cached embeddings cannot judge them: every
        component is kept, the model back at the first point. Learned means that some point
        with a component scores above ``learned`` (e.g. the majority class's accuracy) and that
        its validation rows' losses, where their mean was lowest (:func:`refit_score`), beat
        the constant prediction's (:func:`~vflfs.ml.metrics.prior_losses`) by one standard
        error of the paired
        differences (:meth:`learned`): on a few dozen training rows the top model memorises the
        cached embeddings, and a point 2 of 20 validation rows above the majority class, with a
        loss above the class frequencies', had closed every component.

        Returns, per party, the chosen components, the losses of every epoch, and one record
        per point (lambda, validation score and loss, components kept per party), in the order
        of lambda.
        """
        self.run(growth)
        if not self.learned(learned):
            reason = "learned nothing from the cached embeddings"
            return self.keep(0, reason), self.losses, self.sorted()
        chosen = self.refine(self.choose(good), good, refine)
        return self.keep(self.widest(chosen, good, refine)), self.losses, self.sorted()

    def run(self, growth: float) -> None:
        """Lambda from ``p.lam``, times ``growth`` per point, each point warm-started from the
        last, until no component is left or ``points`` points."""
        for j in range(self.points):
            self.point(self.p.lam * growth**j, 0 if j == 0 else len(self.records) - 1)
            if not sum(self.records[-1]["kept"]):
                break

    def learned(self, level: float) -> bool:
        """Whether some point with a component scores above ``level`` on the validation rows
        and beats the constant prediction's losses there by one standard error of the paired
        differences (:meth:`select`), its losses taken where their mean was lowest
        (:func:`refit_score`)."""
        prior = prior_losses(self.server.task, self.y, self.validation[1])
        for record, losses in zip(self.records, self.lowest_losses, strict=True):
            excess, se = paired_excess(losses, prior)
            if sum(record["kept"]) and record["val_metric"] > level and excess + se < 0:
                return True
        return False

    def refine(self, chosen: int, good: Good, times: int) -> int:
        """Look ``times`` more for the good point with the fewest components between
        ``chosen`` and the next point with fewer: lambda at the geometric mean of ``hi``, the
        smallest lambda of a sparser point, and ``lo``, the largest below it of a point at
        least as dense (warm-started from it); the choice. Each new point narrows that
        bracket, so no lambda is trained twice."""
        for _ in range(times):
            kept = sum(self.records[chosen]["kept"])
            sparser = [j for j, q in enumerate(self.records) if sum(q["kept"]) < kept]
            if not sparser:
                break
            hi = self.records[min(sparser, key=lambda j: self.records[j]["lam"])]["lam"]
            denser = [
                j for j, q in enumerate(self.records) if sum(q["kept"]) >= kept and q["lam"] < hi
            ]
            if not denser:
                break
            lo = max(denser, key=lambda j: self.records[j]["lam"])
            self.point(math.sqrt(self.records[lo]["lam"] * hi), lo)
            chosen = self.choose(good)
        return chosen

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
        ``chosen``, looked for ``refine`` times below them: lambda at the geometric mean of
        the smallest one of the run of points with those parties open that holds ``chosen``
        and the largest below it (warm-started from the latter). The fewest components scored
        on the pre-trained embeddings need not serve the bottom models trained afresh on them.
        Each new point narrows that bracket, so no lambda is trained twice."""
        parties = self.open(chosen)
        for i in range(refine + 1):
            same = [j for j in {*self.good(good), chosen} if self.open(j) == parties]
            widest = max(  # on ties the smallest lambda
                same,
                key=lambda j: (
                    sum(self.records[j]["kept"]),
                    self.records[j]["val_metric"],
                    -self.records[j]["lam"],
                ),
            )
            order = sorted(range(len(self.records)), key=lambda j: self.records[j]["lam"])
            at = order.index(chosen)
            while at > 0 and self.open(order[at - 1]) == parties:
                at -= 1
            if at == 0 or i == refine:
                break
            lo, prev = order[at], order[at - 1]
            self.point(math.sqrt(self.records[lo]["lam"] * self.records[prev]["lam"]), prev)
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
) -> tuple[Scored, Scored]:
    """A path point's validation score without its shrinkage: a copy of the top model cut to
    the ``kept`` components, trained for ``p.epochs`` epochs of the top model's own optimiser
    on the cached embeddings with no penalty. Returns its best epoch's scores, which the
    choice compares, and those of the epoch where the mean validation loss was lowest, the
    point's own model (cut, before training) included, which say whether the top model
    learned anything (:meth:`ComponentPath.learned`). The server's model is not touched.

    Cached embeddings of training rows that the pre-trained models memorised make the top
    model overconfident within an epoch or two: on 3000 rows of 600 columns, half of them a
    party of pure noise, the point that had closed that party scored 72% on validation
    (majority 50%) at a mean loss of 0.79 at its best score's epoch, above the constant
    prediction's 0.69, and stage 2 found that it had learned nothing and kept every
    component; at their lowest its losses were below. Comparing the points by those lowest
    losses too made the choice denser on SYLVA (a model with more components gains more from
    stopping early), so the choice keeps the best epoch's.
    """
    refit = copy.deepcopy(server)
    refit.prox_tau = 0.0
    for m, k in enumerate(kept):
        refit.keep_components(m, k)  # also a fresh optimiser over the cut model
    cols = [torch.as_tensor(k, dtype=torch.long, device=server.device) for k in kept]
    train = [x[:, c] for x, c in zip(inputs, cols, strict=True)]
    val = refit.tensors(
        [np.asarray(e)[:, k] for e, k in zip(validation[0], kept, strict=True)], False
    )
    with torch.no_grad():  # the point's model cut to its components, before training
        lowest = refit.evaluate_head(refit.model.interact(val), validation[1])
    best: Scored | None = None
    for epoch in range(max(p.epochs, 1)):
        for rows in p.batches(len(y), epoch):
            idx = torch.tensor(rows, device=server.device)  # rows may be read-only
            refit.head_step(refit.model.interact([x[idx] for x in train]), y[rows])
        with torch.no_grad():
            scored = refit.evaluate_head(refit.model.interact(val), validation[1])
        if best is None or scored.metric > best.metric:
            best = scored
        if scored.loss < lowest.loss:
            lowest = scored
    assert best is not None
    return best, lowest
