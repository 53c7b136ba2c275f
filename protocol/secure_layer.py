"""Operations of the secure interactive layer (spec section 4; :mod:`vflfs.ml.secure_layer`).

``train.secure_setup`` gives the party the server's public key and the layer's settings;
``train.secure_step`` is ``train.step`` with encrypted embeddings up and masked embedding
gradients down; ``train.secure_forward`` and ``train.secure_backward`` are the protocol's
extra round-trips. Ciphertexts and masked integers travel as ``uint8`` arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .body import Body, Operation
from .core import EVALUATION, StepRequest

TRAIN = "train"  # secure forward of the pending training batches
EVAL = "eval"  # secure forward of the evaluation rows


@dataclass(frozen=True)
class SecureSetupRequest(Body):
    """``mode`` (``plaintext`` / ``paillier``), the key size, the server's public key, the
    layer's width, the party's noise std on the weight gradient, the interactive weights'
    learning rate, CPU workers (0: every CPU) and the randomness (``djn`` / ``full``)."""

    mode: str
    key_bits: int
    server_key: np.ndarray
    width: int
    noise: float
    lr: float
    workers: int = 0
    randomness: str = "djn"


@dataclass(frozen=True)
class SecureSetupReply(Body):
    """The party's public key (empty in plaintext mode)."""

    public_key: np.ndarray


@dataclass(frozen=True)
class SecureStepRequest(StepRequest):
    """:class:`~vflfs.protocol.core.StepRequest` whose ``grads`` are masked gradients
    ``delta W - r`` (wire integers; the party adds its r)."""


@dataclass(frozen=True)
class SecureStepReply(Body):
    """Per batch ``[[g]]`` packed along rows (``cipher``) and along columns (``cipher_t``),
    with the ``open`` masks of embedding gates; at an epoch boundary the evaluation rows'
    ``[[g]]`` along rows, their mask, and the features the model uses."""

    cipher: list | None = None
    cipher_t: list | None = None
    open: list | None = None
    eval_cipher: np.ndarray | None = None
    eval_open: np.ndarray | None = None
    selected: np.ndarray | None = None


@dataclass(frozen=True)
class ForwardRequest(Body):
    """``[[G W~^T + E_s]]`` per pending batch (``which = train``) or for the evaluation rows
    (``which = eval``)."""

    y: list
    which: str = TRAIN


@dataclass(frozen=True)
class ForwardReply(Body):
    """``z + E_s`` for each."""

    z: list


@dataclass(frozen=True)
class BackwardRequest(Body):
    """Per pending batch ``[[G^T delta + R]]_m`` (``gradw``) and ``[[delta]]_s``."""

    gradw: list
    delta: list


@dataclass(frozen=True)
class BackwardReply(Body):
    """Per batch ``G^T delta + R + N`` (``gradw``) and ``[[delta eps + r]]_s`` (``de``)."""

    gradw: list
    de: list


SECURE_SETUP = Operation("train.secure_setup", SecureSetupRequest, SecureSetupReply)
SECURE_STEP = Operation(
    "train.secure_step",
    SecureStepRequest,
    SecureStepReply,
    (("eval_cipher", EVALUATION), ("eval_open", EVALUATION)),
)
SECURE_FORWARD = Operation("train.secure_forward", ForwardRequest, ForwardReply)
SECURE_BACKWARD = Operation("train.secure_backward", BackwardRequest, BackwardReply)
