"""Party operations of the group-lasso strategies (LESS-VFL, local lasso, group lasso).

Castiglia et al. 2023, "LESS-VFL: Communication-Efficient Feature Selection for Vertical
Federated Learning", ICML (Algorithm 1; spec section 5).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from vflfs.ml.embedding_selection import (
    ProxSGD,
    fit_embeddings,
    fit_embeddings_path,
    leave_scores,
)
from vflfs.ml.prox import column_norms, nonzero_columns
from vflfs.protocol import (
    LOCAL_SELECT,
    PRUNE,
    TRAIN_EMBEDDINGS,
    Kept,
    LocalSelectReply,
    LocalSelectRequest,
    PruneRequest,
    TrainEmbeddingsReply,
    TrainEmbeddingsRequest,
)

from .operations import kept
from .party import Party, PartySpec
from .registry import OPERATIONS
from .session import Session


def _train_rows(session: Session) -> np.ndarray:
    """The training rows the server listed at setup, in its order."""
    return np.array(session.party.train_rows, dtype=np.int64)


@OPERATIONS.operation(TRAIN_EMBEDDINGS)
def train_embeddings(session: Session, request: TrainEmbeddingsRequest) -> TrainEmbeddingsReply:
    """LESS-VFL stage 2's one upload: evaluation-mode embeddings of every training row, in the
    order of the training rows given at setup (so no row index travels), and of the first
    ``request.validation`` evaluation rows (the validation rows) if asked."""
    party = session.party
    embeddings, mask = party.embed(_train_rows(session))
    if mask is not None:
        raise ValueError("stage 2 needs the full embedding; this party has embedding gates")
    if not 0 <= request.validation <= len(party.eval_rows):
        raise ValueError(
            f"stage 2 asked for {request.validation} validation rows; the party was given "
            f"{len(party.eval_rows)} evaluation rows at setup"
        )
    if not request.validation:
        return TrainEmbeddingsReply(embeddings=embeddings)
    val, _ = party.embed(np.asarray(party.eval_rows[: request.validation], dtype=np.int64))
    return TrainEmbeddingsReply(embeddings=embeddings, val_embeddings=val)


def local_selection(
    party: Party,
    rows: np.ndarray,
    components: np.ndarray,
    p: ProxSGD,
    path_points: int = 0,
    path_tolerance: float = 0.05,
    path_extend: int = 0,
) -> dict:
    """Stage 3 at ``party``, alone: keep ``components`` (indices into its full set), fit its
    frozen current embeddings of ``rows`` on them with proximal SGD on the input columns,
    then remove every feature whose column is zero. Returns the proxy losses, the path's
    records and one score per feature of the party's full set (0 for a feature it had
    already removed; :func:`leave_scores`).

    A party that stage 2 closed (no component) keeps nothing, but ranks its features all the
    same, on every component it has: the server may reopen it where validation says the
    closure cost accuracy (:meth:`vflfs.strategies.less_vfl.LessVFL.reopen`)."""
    frozen, mask = party.embed(rows)
    if mask is not None:
        raise ValueError("stage 3 needs the full embedding; this party has embedding gates")
    closed = not len(components)
    ranked = party.components if closed else components
    positions = np.searchsorted(party.components, ranked)
    if not np.array_equal(party.components[positions], ranked):
        raise ValueError("can only keep embedding components that are still in use")
    party.keep(components=ranked)
    X = party.X[torch.as_tensor(rows, device=party.device)]
    targets = torch.as_tensor(frozen[:, positions], device=party.device)
    layer = party.model.input_layer
    if path_points > 0:
        losses, path = fit_embeddings_path(
            party.model, layer, X, targets, p, path_points, path_tolerance, path_extend
        )
    else:
        losses, path = fit_embeddings(party.model, layer, X, targets, p), []
    norms = [r.pop("norms") for r in path] or [column_norms(layer.weight).cpu().numpy()]
    scores = np.zeros(party.X_all.shape[1])
    scores[party.features] = leave_scores(norms)
    if closed:
        party.keep(features=party.features[:0], components=components)
    else:
        party.keep(features=party.features[nonzero_columns(layer.weight).cpu().numpy()])
    return {"losses": losses, "path": path, "scores": scores}


@OPERATIONS.operation(LOCAL_SELECT)
def local_select(session: Session, request: LocalSelectRequest) -> LocalSelectReply:
    """Deliver K_m and run stage 3 before replying: no message is exchanged while it runs.

    The reply says when stage 3 started and ended (wall clock), its first and last proxy loss,
    and what the party kept; its layers have shrunk, so removed features and components are no
    longer computed or sent.
    """
    party = session.party
    components = np.asarray(request.components, dtype=np.int64)
    p = request.prox
    started = time.time()
    out = local_selection(
        party,
        _train_rows(session),
        components,
        p,
        int(request.path_points),
        float(request.path_tolerance),
        int(request.path_extend),
    )
    ended = time.time()
    session.changed = True
    losses = out["losses"] or [float("nan")]
    return LocalSelectReply(
        started=started,
        ended=ended,
        loss_first=float(losses[0]),
        loss_last=float(losses[-1]),
        features=party.features.astype(np.int64),
        components=party.components.astype(np.int64),
        path_r2=[float(r["r2"]) for r in out["path"]],
        path_kept=[int(r["kept"]) for r in out["path"]],
        path_lr=[float(r["lr"]) for r in out["path"]],
        scores=out["scores"],
    )


@OPERATIONS.operation(PRUNE)
def prune(session: Session, request: PruneRequest) -> Kept:
    """End a group-lasso phase: remove the features whose input column is zero (and the
    embedding components not listed in ``components``), stop the prox, and continue with the
    optimiser ``optimizer`` at learning rate ``lr``."""
    party = session.party
    spec = session.spec
    spec["prox"] = None
    spec["optimizer"] = {"name": str(request.optimizer), "lr": float(request.lr)}
    features = party.selected()
    party.spec = PartySpec.from_dict(spec)
    components = request.components
    party.keep(features, None if components is None else np.asarray(components, np.int64))
    session.changed = True
    return kept(party)
