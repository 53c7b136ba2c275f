"""The core operations of the VFL protocol (spec section 3): who a party is, its setup, the
training step, and what its model uses."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vflfs.ml.batches import epoch_batches

from .body import Body, Empty, Operation, flat_field, json_field

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
class BatchPlan:
    """Batches ``first`` .. ``first + count - 1`` of epoch ``epoch``'s seeded shuffle of the
    training rows given at setup, ``size`` rows each (:func:`vflfs.ml.batches.epoch_batches`):
    the next batches in a few integers, which the party expands itself."""

    seed: int
    epoch: int
    size: int
    first: int
    count: int

    def rows(self, train_rows: np.ndarray) -> list[np.ndarray]:
        """The batches' row indices, drawn from ``train_rows``."""
        batches = epoch_batches(train_rows, self.size, self.seed, self.epoch)
        if self.first < 0 or self.count < 0 or self.first + self.count > len(batches):
            raise ValueError(
                f"batches {self.first}..{self.first + self.count - 1} do not exist in an epoch "
                f"of {len(batches)}; the server and party hold different training rows"
            )
        return batches[self.first : self.first + self.count]


@dataclass(frozen=True)
class StepRequest(Body):
    """The gradients of the pending batches (one array each), the next batches (their row
    indices in ``batches``, or their :class:`BatchPlan` in ``plan``), and whether to return
    evaluation embeddings too (after the update). With K > 1 local steps, ``curvature``: per
    pending batch the loss's curvature along its gradient (:mod:`vflfs.ml.stale_gradients`).
    ``snapshot``: the server checkpoints this epoch boundary, so the party first saves the
    state it holds (:mod:`vflfs.client_app.store`); sent with every evaluation request, true or
    false, so that no message's size depends on when the run checkpoints."""

    grads: list = field(default_factory=list)
    batches: list = field(default_factory=list)
    evaluate: bool = False
    snapshot: bool | None = None
    curvature: np.ndarray | None = None
    plan: BatchPlan | None = flat_field(BatchPlan, "plan_", int, optional=True)

    def batch_rows(self, train_rows: np.ndarray) -> list[np.ndarray]:
        """The next batches' row indices (``plan`` expanded over ``train_rows``)."""
        if self.plan is not None and len(self.batches):
            raise ValueError("a step request carries its batches or their plan, not both")
        if self.plan is not None:
            return self.plan.rows(train_rows)
        return [np.asarray(b, dtype=np.int64) for b in self.batches]


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
