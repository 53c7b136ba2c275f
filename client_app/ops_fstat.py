"""Party operations of the secure F-statistic phase (the SFFS-style filter; SPEC section 6).

``query.fstat_mask`` (class sums of the party's quantised features under the server's key,
masked, packed, re-randomised), ``query.fstat_combine`` (turn the server's replies into
[[omega (N sum_k v_k S_k^2 - 2^E S^2)]]) and ``query.fstat_scores`` (keep this party's own
F-statistics). Between the first two the party keeps its masks and its totals in
``context.state``. The party must be set up (``query.setup``).
"""

from __future__ import annotations

import numpy as np
from flwr.app import ArrayRecord

from vflfs.federation import Payload
from vflfs.federation.payload import from_array as record_array
from vflfs.federation.payload import to_array as record
from vflfs.ml import paillier
from vflfs.ml.fstat import FStatParams
from vflfs.ml.fstat_secure import party_combine, party_mask
from vflfs.ml.parallel import resolve_workers

from .ops_gini import store_scores, training_view
from .registry import OPERATIONS
from .session import Session

PENDING = "vflfs.fstat.pending"


def _kept_bytes(params: FStatParams) -> int:
    """Bytes for the kept integers: masks (< 2^width) and sum x^2 (< N 2^2P)."""
    return (max(params.width, 2 * params.value_bits + params.rows.bit_length()) + 7) // 8


@OPERATIONS.operation("query.fstat_mask")
def fstat_mask(session: Session, payload: Payload) -> Payload:
    """Step 1. Payload: ``public_key``, ``labels`` ([[A]] of the training ``rows``, uint8
    (rows, classes - 1, bytes)), ``rows``, the ``fstat_*`` parameters, ``workers``."""
    key = paillier.PublicKey.from_bytes(payload["public_key"])
    params = FStatParams.from_payload(payload)
    X = training_view(session, payload["rows"])
    labels = paillier.from_array(payload["labels"])
    packed, kept = party_mask(X, labels, key, params, resolve_workers(payload.get("workers")))
    session.context.state[PENDING] = ArrayRecord(
        {
            "public_key": record(np.frombuffer(key.to_bytes(), dtype=np.uint8)),
            "kept": record(
                paillier.to_array(kept.ravel().tolist(), _kept_bytes(params), kept.shape)
            ),
        }
    )
    flat = [c for feature in packed for c in feature]
    return {"packed": paillier.to_array(flat, key.nbytes, (len(packed), params.chunks))}


@OPERATIONS.operation("query.fstat_combine")
def fstat_combine(session: Session, payload: Payload) -> Payload:
    """Step 3. Payload: ``returned`` (uint8 (features, classes + 1, bytes)), ``class_weights``
    ([[v_0]]..[[v_{c-1}]], [[L]]: uint8 (classes + 1, bytes)), the ``fstat_*`` parameters,
    ``workers``."""
    if PENDING not in session.context.state:
        raise ValueError("query.fstat_combine before query.fstat_mask: no masks kept")
    pending = {k: record_array(a) for k, a in session.context.state[PENDING].items()}
    key = paillier.PublicKey.from_bytes(pending["public_key"].tobytes())
    params = FStatParams.from_payload(payload)
    shape = pending["kept"].shape[:-1]
    kept = np.asarray(paillier.from_array(pending["kept"]), dtype=object).reshape(shape)
    returned = np.asarray(payload["returned"])
    if returned.shape[:2] != (shape[0], params.n_classes + 1):
        raise ValueError(f"returned ciphertexts of shape {returned.shape} for {shape[0]} features")
    flat = paillier.from_array(returned)
    per = params.n_classes + 1
    per_feature = [flat[f * per : (f + 1) * per] for f in range(shape[0])]
    weights = paillier.from_array(payload["class_weights"])
    workers = resolve_workers(payload.get("workers"))
    values = party_combine(key, params, kept, per_feature, weights, workers)
    del session.context.state[PENDING]
    return {"values": paillier.to_array(values, key.nbytes)}


@OPERATIONS.operation("query.fstat_scores")
def fstat_scores(session: Session, payload: Payload) -> Payload:
    """Step 5: the server's F-statistics of this party's own features."""
    scores = np.asarray(payload["scores"], dtype=np.float64)
    store_scores(session.context, "fstat", scores)
    return {"features": int(scores.size)}
