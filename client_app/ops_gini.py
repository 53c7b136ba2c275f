"""Party operations of the secure Gini phase (FedSDG-FS Algorithm 1; spec section 4).

Three messages, in order: ``query.gini_mask`` (bin, sum [[A]] per bin, mask, pack, re-randomise),
``query.gini_combine`` (turn the server's [[sum_k u_ik^2]], or with two classes its
[[sum_i a_i b_i]], into [[sum_i w_i sum_k n_ik^2]], packed for several features) and
``query.gini_scores`` (keep this party's own scores). Between the first two the party keeps its
weights and one ciphertext per feature in ``context.state``; its masks never leave it. The party
must be set up (``query.setup``): it scores every feature of its full set on its training rows.
"""

from __future__ import annotations

import numpy as np

from vflfs.ml import paillier
from vflfs.ml.gini_secure import Masked, party_combine, party_mask
from vflfs.ml.parallel import resolve_workers
from vflfs.protocol import (
    GINI_COMBINE,
    GINI_MASK,
    GINI_SCORES,
    GiniCombineReply,
    GiniCombineRequest,
    GiniMaskRequest,
    MaskReply,
    ScoresReply,
    ScoresRequest,
)

from .registry import OPERATIONS
from .scoring import by_feature, keep_pending, keep_scores, load_pending, mask_inputs
from .scoring import stored_scores as stored_scores  # where the Gini phase's users look
from .session import Session

PENDING = "vflfs.gini.pending"


@OPERATIONS.operation(GINI_MASK)
def gini_mask(session: Session, request: GiniMaskRequest) -> MaskReply:
    """Step 1: bin, sum [[A]] per bin, mask, pack, re-randomise."""
    given = mask_inputs(session, request)
    key, params = given.key, request.params
    masked = party_mask(given.X, given.labels, key, params, given.workers)
    keep_pending(
        session,
        PENDING,
        key,
        {
            "kept": paillier.to_wire(masked.kept, key.nbytes),
            "weights": masked.weights,
            "djn": np.asarray([int(masked.djn)], dtype=np.int64),
            "packing": np.asarray(
                [int(masked.product), masked.q_width, masked.q_per_ct], dtype=np.int64
            ),
        },
    )
    flat = [c for feature in masked.packed for c in feature]
    return MaskReply(packed=paillier.to_wire(flat, key.nbytes, (len(masked.packed), params.chunks)))


@OPERATIONS.operation(GINI_COMBINE)
def gini_combine(session: Session, request: GiniCombineRequest) -> GiniCombineReply:
    """Step 3: [[sum_k u_ik^2]] per feature and bin (two classes: [[sum_i a_i b_i]] per
    feature) into [[sum_i w_i sum_k n_ik^2]], ``q_per_ct`` features per ciphertext."""
    key, pending = load_pending(
        session,
        PENDING,
        f"{GINI_COMBINE.name} before {GINI_MASK.name}: no masked values kept",
    )
    product, q_width, q_per_ct = (int(v) for v in pending["packing"])
    masked = Masked(
        packed=[],
        kept=paillier.ciphertexts(pending["kept"]),
        weights=np.array(pending["weights"]),
        djn=bool(pending["djn"][0]),
        product=bool(product),
        q_width=q_width,
        q_per_ct=q_per_ct,
    )
    squares = np.asarray(request.squares)
    features, bins = masked.weights.shape
    if squares.shape[:2] != (features, 1 if product else bins):
        raise ValueError(f"squares of shape {squares.shape} for weights {masked.weights.shape}")
    per_feature = by_feature(squares)
    weighted = party_combine(key, masked, per_feature, resolve_workers(request.workers))
    session.store.drop(PENDING)
    return GiniCombineReply(weighted=paillier.to_wire(weighted, key.nbytes))


@OPERATIONS.operation(GINI_SCORES)
def gini_scores(session: Session, request: ScoresRequest) -> ScoresReply:
    """Step 5: the server's Gini scores of this party's own features (nobody else's)."""
    return keep_scores(session, request, "gini")
