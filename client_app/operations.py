"""The core party operations of the VFL protocol (spec section 3)."""

from __future__ import annotations

import json

import numpy as np
import torch

from vflfs.federation import Payload

from . import store
from .ops_align import local_spec
from .registry import OPERATIONS
from .session import Session


@OPERATIONS.operation("query.info")
def info(session: Session, payload: Payload) -> Payload:
    """Who this party is: its partition id, and what hardware it has."""
    return {
        "partition_id": session.partition_id,
        "num_partitions": session.num_partitions,
        "cuda_devices": torch.cuda.device_count() if torch.cuda.is_available() else 0,
    }


@OPERATIONS.operation("query.setup")
def setup(session: Session, payload: Payload) -> Payload:
    """Build the party's data view and bottom model from the server's instructions.

    A party with its own file (node config ``data-path``) reads its features from it, at the
    aligned rows the server sends; its node config ``device`` overrides the run's.
    """
    spec = json.loads(payload["spec"])
    if int(spec["index"]) != session.partition_id:
        raise ValueError(
            f"setup for party {spec['index']} reached the node with partition-id "
            f"{session.partition_id}"
        )
    spec = local_spec(session, spec)
    rows = {"train": np.asarray(payload["train_rows"]), "eval": np.asarray(payload["eval_rows"])}
    party = session.create(spec, payload["nonce"], rows)
    return {
        "n_features": party.n_features,
        "spurious": np.flatnonzero(party.data.spurious).astype(np.int64),
        "device": str(party.device),
    }


@OPERATIONS.operation("train.step")
def step(session: Session, payload: Payload) -> Payload:
    """Apply the gradients of the last batches, then embed the next ones (one round-trip).

    Payload: ``grads`` (one array per pending batch, possibly empty), ``batches`` (row indices
    of the next K batches, possibly empty) and ``evaluate`` (also return evaluation-mode
    embeddings of the evaluation rows given at setup, after the update). With embedding gates,
    embeddings carry only the open components and an ``open`` mask per batch.

    The step that asks for the evaluation ends an epoch: the state the party holds before it
    is the one the server checkpoints, saved first to the party's state folder if it has one.
    """
    if payload.get("evaluate"):
        store.write_snapshot(session.context)
    party = session.party
    party.apply_pending(payload.get("grads") or [])
    out = party.embed_batches([np.asarray(b) for b in payload.get("batches") or []])
    session.changed = True
    reply: Payload = {}
    if out:
        reply["embeddings"] = [e for e, _ in out]
        if out[0][1] is not None:
            reply["open"] = [m for _, m in out]
    if payload.get("evaluate"):
        reply.update(_evaluation(party))
    return reply


def _evaluation(party) -> Payload:
    embeddings, mask = party.embed(party.eval_rows)
    reply: Payload = {"eval_embeddings": embeddings, "selected": party.selected()}
    if mask is not None:
        reply["eval_open"] = mask
    return reply


@OPERATIONS.operation("query.embed")
def embed(session: Session, payload: Payload) -> Payload:
    """Evaluation-mode embeddings of many rows at once (forward only)."""
    embeddings, mask = session.party.embed(np.asarray(payload["rows"]))
    return {"embeddings": embeddings} if mask is None else {"embeddings": embeddings, "open": mask}


@OPERATIONS.operation("query.importance")
def importance(session: Session, payload: Payload) -> Payload:
    """How much the party's model uses each of its input features."""
    kind, values = session.party.importance()
    return {"kind": kind, "values": values.astype(np.float32)}


@OPERATIONS.operation("train.keep")
def keep(session: Session, payload: Payload) -> Payload:
    """Remove features and/or embedding components for good (indices into the full sets).

    Payload: ``features`` and/or ``components`` (int arrays of what to keep). The party's
    layers shrink, so removed columns are no longer computed or sent.
    """
    party = session.party
    party.keep(payload.get("features"), payload.get("components"))
    session.changed = True
    return {"features": party.features, "components": party.components}


@OPERATIONS.operation("train.penalty")
def penalty(session: Session, payload: Payload) -> Payload:
    """Move to a regularisation path's next point: every gate lambda and the prox lambda are
    the setup's values times ``scale``."""
    party = session.party
    scale = float(payload["scale"])
    party.set_penalty(scale)
    session.spec["penalty_scale"] = scale
    session.changed = True
    return {}


@OPERATIONS.operation("query.selection")
def selection(session: Session, payload: Payload) -> Payload:
    """The features the party's model uses now, and the embedding components it sends."""
    party = session.party
    return {"selected": party.selected(), "components": party.open_components()}
