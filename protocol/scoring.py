"""Operations of the secure scoring phases: the Gini importance (FedSDG-FS Algorithm 1) and the
ANOVA F-statistic (spec sections 4 and 6).

Each phase has three messages: ``*_mask`` (the server's public key and encrypted labels; the
party returns its packed, masked per-feature ciphertexts), ``*_combine`` (the server's reply to
those; the party returns its per-feature results, several packed per ciphertext) and
``*_scores`` (the party's own features' scores). Ciphertexts travel as ``uint8`` arrays
(:func:`vflfs.ml.paillier.to_wire`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vflfs.ml.fstat import FStatParams
from vflfs.ml.gini import GiniParams

from .body import Body, Operation, flat_field


@dataclass(frozen=True)
class MaskRequest(Body):
    """The server's public key, the encrypted one-hot labels ``[[A]]`` of the training ``rows``
    (``uint8`` (rows, classes - 1, bytes)), CPU workers (0: every CPU)."""

    public_key: bytes
    labels: np.ndarray
    rows: np.ndarray
    workers: int = 0


@dataclass(frozen=True)
class GiniMaskRequest(MaskRequest):
    params: GiniParams = flat_field(GiniParams, "gini_", int)


@dataclass(frozen=True)
class FStatMaskRequest(MaskRequest):
    params: FStatParams = flat_field(FStatParams, "fstat_", int)


@dataclass(frozen=True)
class MaskReply(Body):
    """Per feature, the party's packed masked ciphertexts: ``uint8`` (features, chunks,
    bytes)."""

    packed: np.ndarray


@dataclass(frozen=True)
class GiniCombineRequest(Body):
    """``[[sum_k u_ik^2]]`` per feature and bin: ``uint8`` (features, bins, bytes); with two
    classes ``[[sum_i a_i b_i]]`` per feature: (features, 1, bytes)."""

    squares: np.ndarray
    workers: int = 0


@dataclass(frozen=True)
class GiniCombineReply(Body):
    """``[[sum_i w_i sum_k n_ik^2]]``, ``GiniParams.q_per_ct`` features packed per
    ciphertext."""

    weighted: np.ndarray


@dataclass(frozen=True)
class FStatCombineRequest(Body):
    """The server's returned ciphertexts (``uint8`` (features, classes + 1, bytes)), the
    encrypted class weights ``[[v_0]]..[[v_{c-1}]], [[L]]``, the parameters, CPU workers."""

    returned: np.ndarray
    class_weights: np.ndarray
    params: FStatParams = flat_field(FStatParams, "fstat_", int)
    workers: int = 0


@dataclass(frozen=True)
class FStatCombineReply(Body):
    """``[[omega (N sum_k v_k S_k^2 - 2^E S^2)]]``, ``FStatParams.v_per_ct`` features packed per
    ciphertext."""

    values: np.ndarray


@dataclass(frozen=True)
class ScoresRequest(Body):
    """The server's scores of the party's own features (nobody else's)."""

    scores: np.ndarray


@dataclass(frozen=True)
class ScoresReply(Body):
    features: int


GINI_MASK = Operation("query.gini_mask", GiniMaskRequest, MaskReply)
GINI_COMBINE = Operation("query.gini_combine", GiniCombineRequest, GiniCombineReply)
GINI_SCORES = Operation("query.gini_scores", ScoresRequest, ScoresReply)
FSTAT_MASK = Operation("query.fstat_mask", FStatMaskRequest, MaskReply)
FSTAT_COMBINE = Operation("query.fstat_combine", FStatCombineRequest, FStatCombineReply)
FSTAT_SCORES = Operation("query.fstat_scores", ScoresRequest, ScoresReply)
