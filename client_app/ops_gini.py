"""Party operations of the secure Gini phase (FedSDG-FS Algorithm 1; SPEC section 4).

Three messages, in order: ``query.gini_mask`` (bin, sum [[A]] per bin, mask, pack, re-randomise),
``query.gini_combine`` (turn the server's [[sum_k u_ik^2]] into [[sum_i w_i sum_k n_ik^2]]) and
``query.gini_scores`` (keep this party's own scores). Between the first two the party keeps its
weights and one ciphertext per feature in ``context.state``; its masks never leave it. The party
must be set up (``query.setup``): it scores every feature of its full set on its training rows.
"""

from __future__ import annotations

import numpy as np
from flwr.app import ArrayRecord, Context

from vflfs.federation import Payload
from vflfs.federation.payload import from_array as record_array
from vflfs.federation.payload import to_array as record
from vflfs.ml import paillier
from vflfs.ml.gini import GiniParams
from vflfs.ml.gini_secure import Masked, party_combine, party_mask
from vflfs.ml.parallel import resolve_workers

from .registry import OPERATIONS
from .session import Session

PENDING = "vflfs.gini.pending"
SCORES = "vflfs.scores."  # + kind ("gini", "fstat")


def store_scores(context: Context, kind: str, scores: np.ndarray) -> None:
    """Keep this party's own scores from a secure filter phase in ``context.state``."""
    context.state[SCORES + kind] = ArrayRecord(
        {"scores": record(np.asarray(scores, dtype=np.float64))}
    )


def stored_scores(context: Context, kind: str = "gini") -> np.ndarray | None:
    """The scores the server returned to this party in the last ``kind`` phase, if any."""
    if SCORES + kind not in context.state:
        return None
    return np.array(record_array(context.state[SCORES + kind]["scores"]))


def training_view(session: Session, rows: np.ndarray) -> np.ndarray:
    """The party's full feature set (real and spurious columns) at the given training rows."""
    return np.asarray(session.party.data.X)[np.asarray(rows, dtype=np.int64)]


@OPERATIONS.operation("query.gini_mask")
def gini_mask(session: Session, payload: Payload) -> Payload:
    """Step 1. Payload: ``public_key`` (bytes), ``labels`` ([[A]] of the training ``rows``,
    uint8 (rows, classes - 1, bytes)), ``rows``, the ``gini_*`` parameters, ``workers``."""
    key = paillier.PublicKey.from_bytes(payload["public_key"])
    params = GiniParams.from_payload(payload)
    X = training_view(session, payload["rows"])
    labels = paillier.from_array(payload["labels"])
    masked = party_mask(X, labels, key, params, resolve_workers(payload.get("workers")))
    session.context.state[PENDING] = ArrayRecord(
        {
            "public_key": record(np.frombuffer(key.to_bytes(), dtype=np.uint8)),
            "kept": record(paillier.to_array(masked.kept, key.nbytes)),
            "weights": record(masked.weights),
        }
    )
    flat = [c for feature in masked.packed for c in feature]
    return {"packed": paillier.to_array(flat, key.nbytes, (len(masked.packed), params.chunks))}


@OPERATIONS.operation("query.gini_combine")
def gini_combine(session: Session, payload: Payload) -> Payload:
    """Step 3. Payload: ``squares`` (uint8 (features, bins, bytes)), ``workers``."""
    if PENDING not in session.context.state:
        raise ValueError("query.gini_combine before query.gini_mask: no masked values kept")
    pending = {k: record_array(a) for k, a in session.context.state[PENDING].items()}
    key = paillier.PublicKey.from_bytes(pending["public_key"].tobytes())
    masked = Masked(
        packed=[], kept=paillier.from_array(pending["kept"]), weights=np.array(pending["weights"])
    )
    squares = np.asarray(payload["squares"])
    if squares.shape[:2] != masked.weights.shape:
        raise ValueError(f"squares of shape {squares.shape} for weights {masked.weights.shape}")
    flat = paillier.from_array(squares)
    bins = squares.shape[1]
    per_feature = [flat[f * bins : (f + 1) * bins] for f in range(squares.shape[0])]
    weighted = party_combine(key, masked, per_feature, resolve_workers(payload.get("workers")))
    del session.context.state[PENDING]
    return {"weighted": paillier.to_array(weighted, key.nbytes)}


@OPERATIONS.operation("query.gini_scores")
def gini_scores(session: Session, payload: Payload) -> Payload:
    """Step 5: the server's Gini scores of this party's own features (nobody else's)."""
    scores = np.asarray(payload["scores"], dtype=np.float64)
    store_scores(session.context, "gini", scores)
    return {"features": int(scores.size)}
