"""Operations of the group-lasso strategies (LESS-VFL, local lasso, group lasso; spec section 5).

Castiglia et al. 2023, "LESS-VFL: Communication-Efficient Feature Selection for Vertical
Federated Learning", ICML (Algorithm 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vflfs.ml.prox_sgd import ProxSGD

from .body import Body, Operation, flat_field
from .core import Kept


@dataclass(frozen=True)
class TrainEmbeddingsRequest(Body):
    """Stage 2's request; ``validation`` > 0 asks for the embeddings of the first that many
    evaluation rows given at setup too (the validation rows, which come first), on which the
    server chooses its component set along a path."""

    validation: int = 0


@dataclass(frozen=True)
class TrainEmbeddingsReply(Body):
    """Stage 2's one upload: evaluation-mode embeddings of every training row, in the order of
    the training rows given at setup (and, if asked, of the validation rows)."""

    embeddings: np.ndarray
    val_embeddings: np.ndarray | None = None


@dataclass(frozen=True)
class LocalSelectRequest(Body):
    """K_m (``components``) and stage 3's proximal SGD settings; ``path_points`` > 0 fits a
    regularisation path of that many points and keeps its sparsest point within
    ``path_tolerance`` of the best fit."""

    components: np.ndarray
    path_points: int = 0
    path_tolerance: float = 0.05
    path_extend: int = 0  # more points (x2 each) until no column is left
    prox: ProxSGD = flat_field(ProxSGD)


@dataclass(frozen=True)
class LocalSelectReply(Body):
    """When stage 3 started and ended (wall clock), its first and last proxy loss, what the
    party kept, per path point the fit's R^2, the features kept and the SGD step, and each
    feature's score."""

    started: float
    ended: float
    loss_first: float
    loss_last: float
    features: np.ndarray
    components: np.ndarray
    path_r2: list = field(default_factory=list)
    path_kept: list = field(default_factory=list)
    path_lr: list = field(default_factory=list)  # each point's SGD step (smaller: it diverged)
    # One importance per feature of the party's full set (ml.embedding_selection.leave_scores):
    # the path point at which its input column leaves, ties broken by the column's norm there.
    scores: np.ndarray | None = None


@dataclass(frozen=True)
class PruneRequest(Body):
    """End a group-lasso phase: remove the zero input columns (and the embedding components not
    in ``components``), stop the prox, continue with ``optimizer`` at ``lr``."""

    optimizer: str
    lr: float
    components: np.ndarray | None = None


TRAIN_EMBEDDINGS = Operation("query.train_embeddings", TrainEmbeddingsRequest, TrainEmbeddingsReply)
LOCAL_SELECT = Operation("train.local_select", LocalSelectRequest, LocalSelectReply)
PRUNE = Operation("train.prune", PruneRequest, Kept)
