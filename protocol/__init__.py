"""The protocol between the server and the parties: operation names, typed requests and
replies, and their payloads. The server (``strategies``, ``server_app``) and the parties
(``client_app``) both speak it through these classes only."""

import importlib
import pkgutil

from .alignment import ALIGN, AlignReply, AlignRequest
from .body import SAME_VERSION, Body, Empty, Operation, Payload, ProtocolError
from .core import (
    EVALUATION,
    IMPORTANCE,
    INFO,
    INIT_GATES,
    KEEP,
    PENALTY,
    SELECTION,
    SETUP,
    STEP,
    BatchPlan,
    ImportanceReply,
    InfoReply,
    InitGatesReply,
    InitGatesRequest,
    KeepRequest,
    Kept,
    PenaltyRequest,
    SelectionReply,
    SetupReply,
    SetupRequest,
    StepReply,
    StepRequest,
)
from .delivery import Delivery
from .failure import Failure
from .identity import IDENTIFY, IdentifyReply, IdentifyRequest
from .lasso import (
    LOCAL_SELECT,
    PRUNE,
    TRAIN_EMBEDDINGS,
    LocalSelectReply,
    LocalSelectRequest,
    PruneRequest,
    TrainEmbeddingsReply,
    TrainEmbeddingsRequest,
)
from .resume import RESUME, ResumeReply, ResumeRequest
from .scoring import (
    FSTAT_COMBINE,
    FSTAT_MASK,
    FSTAT_SCORES,
    GINI_COMBINE,
    GINI_MASK,
    GINI_SCORES,
    FStatCombineReply,
    FStatCombineRequest,
    FStatMaskRequest,
    GiniCombineReply,
    GiniCombineRequest,
    GiniMaskRequest,
    MaskReply,
    MaskRequest,
    ScoresReply,
    ScoresRequest,
)
from .secure_layer import (
    SECURE_BACKWARD,
    SECURE_FORWARD,
    SECURE_SETUP,
    SECURE_STEP,
    BackwardReply,
    BackwardRequest,
    ForwardReply,
    ForwardRequest,
    SecureSetupReply,
    SecureSetupRequest,
    SecureStepReply,
    SecureStepRequest,
)

OPERATIONS: tuple[Operation, ...] = (
    INFO,
    SETUP,
    STEP,
    IMPORTANCE,
    KEEP,
    PENALTY,
    SELECTION,
    INIT_GATES,
    IDENTIFY,
    ALIGN,
    TRAIN_EMBEDDINGS,
    LOCAL_SELECT,
    PRUNE,
    GINI_MASK,
    GINI_COMBINE,
    GINI_SCORES,
    FSTAT_MASK,
    FSTAT_COMBINE,
    FSTAT_SCORES,
    SECURE_SETUP,
    SECURE_STEP,
    SECURE_FORWARD,
    SECURE_BACKWARD,
    RESUME,
)
"""Every operation a party serves: the ones above, then those of :data:`ADDED`."""


def _added_operations() -> dict[str, tuple[Operation, str]]:
    """The operations that other modules of this package declare (a strategy's own, in
    ``protocol/<module>.py``: no edit here), by name: the operation and its module's name."""
    known = {op.name for op in OPERATIONS}
    added: dict[str, tuple[Operation, str]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Operation) and value.name not in known and value.name not in added:
                added[value.name] = (value, info.name)
    return added


_ADDED = _added_operations()
ADDED: dict[str, str] = {name: module for name, (_, module) in _ADDED.items()}
"""Each added operation's protocol module; the party's handler is in ``client_app/ops_<module>``."""
OPERATIONS += tuple(op for op, _ in _ADDED.values())


__all__ = [
    "ADDED",
    "ALIGN",
    "AlignReply",
    "AlignRequest",
    "BackwardReply",
    "BackwardRequest",
    "BatchPlan",
    "Body",
    "Delivery",
    "EVALUATION",
    "Empty",
    "FSTAT_COMBINE",
    "FSTAT_MASK",
    "FSTAT_SCORES",
    "FStatCombineReply",
    "FStatCombineRequest",
    "FStatMaskRequest",
    "Failure",
    "ForwardReply",
    "ForwardRequest",
    "GINI_COMBINE",
    "GINI_MASK",
    "GINI_SCORES",
    "GiniCombineReply",
    "GiniCombineRequest",
    "GiniMaskRequest",
    "IDENTIFY",
    "IMPORTANCE",
    "INFO",
    "INIT_GATES",
    "IdentifyReply",
    "IdentifyRequest",
    "ImportanceReply",
    "InfoReply",
    "InitGatesReply",
    "InitGatesRequest",
    "KEEP",
    "KeepRequest",
    "Kept",
    "LOCAL_SELECT",
    "LocalSelectReply",
    "LocalSelectRequest",
    "MaskReply",
    "MaskRequest",
    "OPERATIONS",
    "Operation",
    "PENALTY",
    "PRUNE",
    "Payload",
    "PenaltyRequest",
    "ProtocolError",
    "PruneRequest",
    "RESUME",
    "ResumeReply",
    "ResumeRequest",
    "SAME_VERSION",
    "SECURE_BACKWARD",
    "SECURE_FORWARD",
    "SECURE_SETUP",
    "SECURE_STEP",
    "SELECTION",
    "SETUP",
    "STEP",
    "ScoresReply",
    "ScoresRequest",
    "SecureSetupReply",
    "SecureSetupRequest",
    "SecureStepReply",
    "SecureStepRequest",
    "SelectionReply",
    "SetupReply",
    "SetupRequest",
    "StepReply",
    "StepRequest",
    "TRAIN_EMBEDDINGS",
    "TrainEmbeddingsReply",
    "TrainEmbeddingsRequest",
]
