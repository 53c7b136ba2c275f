"""The path's screening of a refit model: the features it misses, and the add-back probe.

A path point is trained at one penalty, and its doubling can close a weak relevant feature
together with the noise; the probes refit top-k sets of the path's ranking, which ranks such a
feature among the noise. Once a model is refit, each party tests every feature the model does
not use for what adding it would do to the training loss (the score test of
:mod:`vflfs.ml.screening`: the lasso's Karush-Kuhn-Tucker check). The server sends each party
the loss's gradients for its training rows' embeddings, as training does, and gets one p-value
per feature back. A feature whose p-value is below ``path.screen_alpha`` divided by the number
of features tested (Bonferroni) is added back: the winner's features plus those are refit as
one more probe (``path.add_back`` of them, each from the model that won), and the choice
weighs it like every other refit (:func:`~vflfs.strategies.path_choice.choose_refit`).
"""

from __future__ import annotations

import numpy as np

from vflfs.federation import Federation
from vflfs.ml.top import ServerModel
from vflfs.protocol import TRAIN_EMBEDDINGS, TrainEmbeddingsRequest
from vflfs.protocol.screening import SCREEN, ScreenRequest
from vflfs.server_app.experiment import Experiment

from .path_choice import PathPoint


def screen(
    federation: Federation,
    experiment: Experiment,
    server: ServerModel,
    features: list[list[int]],
    sizes: list[int],
) -> list[np.ndarray]:
    """Per party: the p-value of each feature of its full set (``sizes``) not among its
    ``features`` (the model's, per party), NaN for the rest (not tested). Every party whose
    model has a feature sends its training rows' embeddings (the top model reads them all);
    those with a feature left out get their gradients back and test; a party whose model has
    no feature sends nothing and tests nothing (NaN throughout)."""
    members = [m for m, f in enumerate(features) if f and len(f) < sizes[m]]
    pvalues = [np.full(n, np.nan) for n in sizes]
    if not members:
        return pvalues
    with federation.traffic.in_phase("screening"):
        embedders = {m: TrainEmbeddingsRequest() for m, f in enumerate(features) if f}
        asked = federation.send(TRAIN_EMBEDDINGS, embedders)
        n = len(experiment.splits.train)
        embeddings = [
            np.asarray(asked[m].embeddings) if m in asked else np.zeros((n, 0), np.float32)
            for m in range(len(sizes))
        ]
        y = experiment.y[experiment.splits.train]
        grads = server.embedding_gradients(embeddings, y)
        replies = federation.send(
            SCREEN, {m: ScreenRequest(gradients=grads[m].astype(np.float32)) for m in members}
        )
    for m in members:
        pvalues[m] = np.asarray(replies[m].pvalues, np.float64)
    return pvalues


def added_back(pvalues: list[np.ndarray], point: PathPoint, alpha: float) -> list[list[int]] | None:
    """Per party: ``point``'s features plus those whose p-value is below ``alpha`` over the
    number of features tested (Bonferroni), on the parties whose components ``point`` keeps;
    None when no feature passes."""
    tested = tested_count(pvalues)
    if not tested:
        return None
    threshold = alpha / tested
    out, added = [], 0
    for p, selected, components in zip(pvalues, point.selected, point.components, strict=True):
        untested_high = np.where(np.isfinite(p), p, np.inf)
        passed = np.flatnonzero(untested_high < threshold).tolist()
        extra = passed if components and selected else []
        out.append(sorted(set(selected) | set(extra)) if components else list(selected))
        added += len(set(extra) - set(selected))
    return out if added else None


def tested_count(pvalues: list[np.ndarray]) -> int:
    """How many features the parties tested (those with a p-value)."""
    return sum(int(np.isfinite(p).sum()) for p in pvalues)


def adjusted_minimum(pvalues: list[np.ndarray] | None) -> float | None:
    """The smallest p-value times the number of features tested, at most 1 (Bonferroni): an
    add-back follows where it is below ``path.screen_alpha``; None when nothing was tested."""
    tested = 0 if pvalues is None else tested_count(pvalues)
    if not tested:
        return None
    assert pvalues is not None
    return min(1.0, tested * min(float(np.nanmin(p)) for p in pvalues if np.isfinite(p).any()))
