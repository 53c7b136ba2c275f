"""Party operations of the secure F-statistic phase (the SFFS-style filter; spec section 6).

``query.fstat_mask`` (class sums of the party's quantised features under the server's key,
masked, packed, re-randomised), ``query.fstat_combine`` (turn the server's replies into
[[omega (N sum_k v_k S_k^2 - 2^E S^2)]]) and ``query.fstat_scores`` (keep this party's own
F-statistics). Between the first two the party keeps its masks and its totals in
``context.state``. The party must be set up (``query.setup``).
"""

from __future__ import annotations

import numpy as np

from vflfs.ml import paillier
from vflfs.ml.fstat import FStatParams
from vflfs.ml.fstat_secure import party_combine, party_mask
from vflfs.ml.parallel import resolve_workers
from vflfs.protocol import (
    FSTAT_COMBINE,
    FSTAT_MASK,
    FSTAT_SCORES,
    FStatCombineReply,
    FStatCombineRequest,
    FStatMaskRequest,
    MaskReply,
    ScoresReply,
    ScoresRequest,
)

from .registry import OPERATIONS
from .scoring import by_feature, keep_pending, keep_scores, load_pending, mask_inputs
from .session import Session

PENDING = "vflfs.fstat.pending"


def _kept_bytes(params: FStatParams) -> int:
    """Bytes for the kept integers: masks (< 2^width) and sum x^2 (< N 2^2P)."""
    return (max(params.width, 2 * params.value_bits + params.rows.bit_length()) + 7) // 8


@OPERATIONS.operation(FSTAT_MASK)
def fstat_mask(session: Session, request: FStatMaskRequest) -> MaskReply:
    """Step 1: class sums of the quantised features under the server's key, masked, packed,
    re-randomised."""
    given = mask_inputs(session, request)
    key, params = given.key, request.params
    packed, kept = party_mask(given.X, given.labels, key, params, given.workers)
    kept = paillier.to_wire(kept.ravel().tolist(), _kept_bytes(params), kept.shape)
    keep_pending(session, PENDING, key, {"kept": kept})
    flat = [c for feature in packed for c in feature]
    return MaskReply(packed=paillier.to_wire(flat, key.nbytes, (len(packed), params.chunks)))


@OPERATIONS.operation(FSTAT_COMBINE)
def fstat_combine(session: Session, request: FStatCombineRequest) -> FStatCombineReply:
    """Step 3: the server's returned ciphertexts and encrypted class weights into
    [[omega (N sum_k v_k S_k^2 - 2^E S^2)]] per feature."""
    key, pending = load_pending(
        session, PENDING, f"{FSTAT_COMBINE.name} before {FSTAT_MASK.name}: no masks kept"
    )
    params = request.params
    shape = pending["kept"].shape[:-1]
    kept = paillier.from_wire(pending["kept"])
    returned = np.asarray(request.returned)
    if returned.shape[:2] != (shape[0], params.n_classes + 1):
        raise ValueError(f"returned ciphertexts of shape {returned.shape} for {shape[0]} features")
    per_feature = by_feature(returned)
    weights = paillier.ciphertexts(request.class_weights)
    workers = resolve_workers(request.workers)
    values = party_combine(key, params, kept, per_feature, weights, workers)
    session.store.drop(PENDING)
    return FStatCombineReply(values=paillier.to_wire(values, key.nbytes))


@OPERATIONS.operation(FSTAT_SCORES)
def fstat_scores(session: Session, request: ScoresRequest) -> ScoresReply:
    """Step 5: the server's F-statistics of this party's own features."""
    return keep_scores(session, request, "fstat")
