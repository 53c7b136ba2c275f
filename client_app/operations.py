"""The core party operations of the VFL protocol (spec section 3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vflfs.protocol import (
    IMPORTANCE,
    INFO,
    KEEP,
    PENALTY,
    SELECTION,
    SETUP,
    STEP,
    Empty,
    ImportanceReply,
    InfoReply,
    KeepRequest,
    Kept,
    PenaltyRequest,
    SelectionReply,
    SetupReply,
    SetupRequest,
    StepReply,
    StepRequest,
)

from . import store
from .party import Party
from .registry import OPERATIONS
from .session import Session


@OPERATIONS.operation(INFO)
def info(session: Session, request: Empty) -> InfoReply:
    """Who this party is: its partition id, and what hardware it has."""
    return InfoReply(
        partition_id=session.partition_id,
        num_partitions=session.num_partitions,
        cuda_devices=torch.cuda.device_count() if torch.cuda.is_available() else 0,
    )


@OPERATIONS.operation(SETUP)
def setup(session: Session, request: SetupRequest) -> SetupReply:
    """Build the party's data view and bottom model from the server's instructions.

    A party with its own file (node config ``data-path``) reads its features from it, at the
    aligned rows the server sends; its node config ``device`` overrides the run's.
    """
    from .ops_align import local_spec  # alignment's libraries only where setup runs

    spec = request.spec
    if int(spec["index"]) != session.partition_id:
        raise ValueError(
            f"setup for party {spec['index']} reached the node with partition-id "
            f"{session.partition_id}"
        )
    spec = local_spec(session, spec)
    rows = {"train": np.asarray(request.train_rows), "eval": np.asarray(request.eval_rows)}
    party = session.create(spec, request.nonce, rows)
    return SetupReply(
        n_features=party.n_features,
        spurious=np.flatnonzero(party.data.spurious).astype(np.int64),
        device=str(party.device),
    )


@dataclass(frozen=True)
class Advanced:
    """What a step leaves the party to send: per next batch its training-mode embedding and
    embedding-gate mask (None without gates); at an epoch boundary, the evaluation rows'
    embeddings, their mask and the features the model uses."""

    embeddings: list[np.ndarray]
    masks: list[np.ndarray] | None
    eval_embeddings: np.ndarray | None = None
    eval_open: np.ndarray | None = None
    selected: np.ndarray | None = None


def advance(
    session: Session,
    grads: list[np.ndarray],
    batches: list,
    evaluate: bool,
    curvature: np.ndarray | None = None,
) -> Advanced:
    """Apply the gradients of the last batches (with K > 1, carried to the party's fresh
    embeddings by the loss's ``curvature``), then embed the next ones (and, with
    ``evaluate``, the evaluation rows given at setup, after the update)."""
    party = session.party
    party.apply_pending(grads, curvature)
    out = party.embed_batches([np.asarray(b) for b in batches])
    session.mark_changed("model", "optim", "pending")
    masks = [m for _, m in out] if out and out[0][1] is not None else None
    advanced = Advanced([e for e, _ in out], masks)
    if not evaluate:
        return advanced
    embeddings, mask = party.embed(party.eval_rows)
    return Advanced(advanced.embeddings, masks, embeddings, mask, party.selected())


@OPERATIONS.operation(STEP)
def step(session: Session, request: StepRequest) -> StepReply:
    """Apply the gradients of the last batches, then embed the next ones (one round-trip).

    With embedding gates, embeddings carry only the open components and an ``open`` mask per
    batch.

    The step that asks for the evaluation ends an epoch; where the server checkpoints that
    boundary (``snapshot``), the state the party holds before the step is saved first to the
    party's state folder, if it has one.
    """
    if request.snapshot:
        store.write_snapshot(session.store)
    batches = request.batch_rows(session.party.train_rows)
    out = advance(session, request.grads, batches, request.evaluate, request.curvature)
    return StepReply(
        embeddings=out.embeddings or None,
        open=out.masks,
        eval_embeddings=out.eval_embeddings,
        eval_open=out.eval_open,
        selected=out.selected,
    )


@OPERATIONS.operation(IMPORTANCE)
def importance(session: Session, request: Empty) -> ImportanceReply:
    """How much the party's model uses each of its input features."""
    kind, values = session.party.importance()
    return ImportanceReply(kind=kind, values=values.astype(np.float32))


@OPERATIONS.operation(KEEP)
def keep(session: Session, request: KeepRequest) -> Kept:
    """Remove features and/or embedding components for good (indices into the full sets).

    The party's layers shrink, so removed columns are no longer computed or sent.
    """
    party = session.party
    party.keep(request.features, request.components)
    session.mark_changed("model", "optim", "structure")
    return kept(party)


def kept(party: Party) -> Kept:
    """The features and components ``party`` uses now."""
    return Kept(features=party.features.astype(np.int64), components=party.components)


@OPERATIONS.operation(PENALTY)
def penalty(session: Session, request: PenaltyRequest) -> Empty:
    """Move to a regularisation path's next point: every gate lambda and the prox lambda are
    the setup's values times ``scale``."""
    party = session.party
    scale = float(request.scale)
    party.set_penalty(scale)
    session.spec["penalty_scale"] = scale
    session.mark_changed("spec")
    return Empty()


@OPERATIONS.operation(SELECTION)
def selection(session: Session, request: Empty) -> SelectionReply:
    """The features the party's model uses now, and the embedding components it sends."""
    party = session.party
    return SelectionReply(selected=party.selected(), components=party.open_components())
