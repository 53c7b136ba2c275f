"""Party operations of the secure F-statistic phase (the SFFS-style filter; spec section 6).

``query.fstat_mask`` (class sums of the party's quantised features under the server's key,
masked, packed, re-randomised), ``query.fstat_combine`` (turn the server's replies into
[[omega (N sum_k v_k S_k^2 - 2^E S^2)]]) and ``query.fstat_scores`` (keep this party's own
F-statistics). Between the first two the party keeps its masks and its totals in
``context.state``. The party must be set up (``query.setup``).
"""

from __future__ import annotations

import numpy as np

from vflfs.federation import Payload
from vflfs.ml import paillier
from vflfs.ml.fstat import FStatParams
from vflfs.ml.fstat_secure import party_combine, party_mask
from vflfs.ml.parallel import resolve_workers

from .registry import OPERATIONS
from .scoring import by_feature, keep_pending, keep_scores, load_pending, mask_inputs
from .session import Session

PENDING = "vflfs.fstat.pending"


def _kept_bytes(params: FStatParams) -> int:
    """Bytes for the kept integers: masks (< 2^width) and sum x^2 (< N 2^2P)."""
    return (max(params.width, 2 * params.value_bits + params.rows.bit_length()) + 7) // 8


@OPERATIONS.operation("query.fstat_mask")
def fstat_mask(session: Session, payload: Payload) -> Payload:
    """Step 1. Payload: ``public_key``, ``labels`` ([[A]] of the training ``rows``, uint8
    (rows, classes - 1, bytes)), ``rows``, the ``fstat_*`` parameters, ``workers``."""
    given = mask_inputs(session, payload)
    key, params = given.key, FStatParams.from_payload(payload)
    packed, kept = party_mask(given.X, given.labels, key, params, given.workers)
    kept = paillier.to_wire(kept.ravel().tolist(), _kept_bytes(params), kept.shape)
    keep_pending(session.context, PENDING, key, {"kept": kept})
    flat = [c for feature in packed for c in feature]
    return {"packed": paillier.to_wire(flat, key.nbytes, (len(packed), params.chunks))}


@OPERATIONS.operation("query.fstat_combine")
def fstat_combine(session: Session, payload: Payload) -> Payload:
    """Step 3. Payload: ``returned`` (uint8 (features, classes + 1, bytes)), ``class_weights``
    ([[v_0]]..[[v_{c-1}]], [[L]]: uint8 (classes + 1, bytes)), the ``fstat_*`` parameters,
    ``workers``."""
    key, pending = load_pending(
        session.context, PENDING, "query.fstat_combine before query.fstat_mask: no masks kept"
    )
    params = FStatParams.from_payload(payload)
    shape = pending["kept"].shape[:-1]
    kept = paillier.from_wire(pending["kept"])
    returned = np.asarray(payload["returned"])
    if returned.shape[:2] != (shape[0], params.n_classes + 1):
        raise ValueError(f"returned ciphertexts of shape {returned.shape} for {shape[0]} features")
    per_feature = by_feature(returned)
    weights = paillier.ciphertexts(payload["class_weights"])
    workers = resolve_workers(payload.get("workers"))
    values = party_combine(key, params, kept, per_feature, weights, workers)
    del session.context.state[PENDING]
    return {"values": paillier.to_wire(values, key.nbytes)}


@OPERATIONS.operation("query.fstat_scores")
def fstat_scores(session: Session, payload: Payload) -> Payload:
    """Step 5: the server's F-statistics of this party's own features."""
    return keep_scores(session, payload, "fstat")
