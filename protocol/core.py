"""The core operations of the VFL protocol (spec section 3): who a party is, its setup, the
training step, and what its model uses."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .body import Body, Empty, Operation, json_field

EVALUATION = "evaluation"  # the traffic phase of evaluation entries riding on a training step


@dataclass(frozen=True)
class InfoReply(Body):
    """Who the party is, and what hardware it has."""

    partition_id: int
    num_partitions: int = 1
    cuda_devices: int = 0


@dataclass(frozen=True)
class SetupRequest(Body):
    """Build the party's data view and bottom model: its instructions (``spec``, a
    ``PartySpec`` as a dict), a fresh ``nonce`` (any earlier state of the run is replaced),
    and the server's training rows and evaluation rows (validation + test)."""

    spec: dict = json_field()
    nonce: str
    train_rows: np.ndarray
    eval_rows: np.ndarray


@dataclass(frozen=True)
class SetupReply(Body):
    n_features: int
    spurious: np.ndarray
    device: str


@dataclass(frozen=True)
class StepRequest(Body):
    """The gradients of the pending batches (one array each), the row indices of the next
    batches, and whether to return evaluation embeddings too (after the update)."""

    grads: list = field(default_factory=list)
    batches: list = field(default_factory=list)
    evaluate: bool = False


@dataclass(frozen=True)
class StepReply(Body):
    """Embeddings of the next batches (only the open components with embedding gates, and an
    ``open`` mask per batch); at an epoch boundary the evaluation rows' embeddings, their mask,
    and the features the model uses."""

    embeddings: list | None = None
    open: list | None = None
    eval_embeddings: np.ndarray | None = None
    eval_open: np.ndarray | None = None
    selected: np.ndarray | None = None


@dataclass(frozen=True)
class ImportanceReply(Body):
    """Per feature of the party's full set: its gate (``gate``) or column norm
    (``weight_norm``)."""

    kind: str
    values: np.ndarray


@dataclass(frozen=True)
class KeepRequest(Body):
    """Features and/or embedding components to keep (indices into the full sets)."""

    features: np.ndarray | list | None = None
    components: np.ndarray | list | None = None


@dataclass(frozen=True)
class Kept(Body):
    """The features and components the party uses now."""

    features: np.ndarray
    components: np.ndarray


@dataclass(frozen=True)
class PenaltyRequest(Body):
    """Every gate lambda and the prox lambda become the setup's values times ``scale``."""

    scale: float


@dataclass(frozen=True)
class SelectionReply(Body):
    """The features the party's model uses now, and the embedding components it sends."""

    selected: np.ndarray
    components: np.ndarray


@dataclass(frozen=True)
class InitGatesRequest(Body):
    """The input gates' mu, one value per feature of the party's full set."""

    mu: np.ndarray


@dataclass(frozen=True)
class InitGatesReply(Body):
    open: int


INFO = Operation("query.info", Empty, InfoReply)
SETUP = Operation("query.setup", SetupRequest, SetupReply)
STEP = Operation(
    "train.step",
    StepRequest,
    StepReply,
    (("eval_embeddings", EVALUATION), ("eval_open", EVALUATION)),
)
IMPORTANCE = Operation("query.importance", Empty, ImportanceReply)
KEEP = Operation("train.keep", KeepRequest, Kept)
PENALTY = Operation("train.penalty", PenaltyRequest, Empty)
SELECTION = Operation("query.selection", Empty, SelectionReply)
INIT_GATES = Operation("train.init_gates", InitGatesRequest, InitGatesReply)
