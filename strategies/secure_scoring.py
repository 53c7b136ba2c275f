"""What the server side of the secure scoring phases shares (Gini, F-statistic).

Both phases (:mod:`vflfs.strategies.gini`, :mod:`vflfs.strategies.fstat_filter`) read integer
settings from a ``strategy.<section>``, score the training rows' class labels, send them once
to every party encrypted under a fresh Paillier key, get back per feature the party's packed
masked ciphertexts, and end by giving each party its own scores. What happens in between is
each protocol's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any, ClassVar, Protocol, Self

import numpy as np
from omegaconf import DictConfig

from vflfs.federation import Federation
from vflfs.ml import paillier
from vflfs.protocol import MaskRequest, Operation, ScoresRequest
from vflfs.runtime.config import ConfigError
from vflfs.server_app.experiment import Experiment

from .settings import typed


class ScoringParams(Protocol):
    """The public parameters of a scoring protocol (``GiniParams``, ``FStatParams``)."""

    n_classes: int

    @property
    def chunks(self) -> int: ...


class SectionConfig:
    """Base of the frozen dataclasses of a ``strategy.<section>`` of settings."""

    section: ClassVar[str]

    @classmethod
    def from_cfg(cls, cfg: Mapping | DictConfig | None) -> Self:
        """The section typed (:func:`~vflfs.strategies.settings.typed`): the defaults for the
        missing keys, typos and values of the wrong type rejected, naming the key."""
        return typed(cls, cfg, f"strategy.{cls.section}")


def scoring_phase(federation: Federation, phase: str):
    """The traffic phase ``phase``, unless the caller already opened it (no double count)."""
    if federation.traffic.phase == phase:
        return nullcontext()
    return federation.traffic.in_phase(phase)


def classification_labels(experiment: Experiment, rows: np.ndarray | None, what: str):
    """The training rows and their class ids, or a config error for regression tasks."""
    if experiment.task.kind != "classification":
        raise ConfigError(
            f"{what} needs class labels; dataset task is {experiment.task.kind}; fix: for "
            "regression choose stg, group_lasso, less_vfl or local_lasso, or fedsdg_fs with "
            "strategy.init=uniform (no Gini initialisation)"
        )
    rows = experiment.splits.train if rows is None else rows
    rows = np.asarray(rows, dtype=np.int64)
    return rows, np.asarray(experiment.y)[rows].astype(np.int64)


def send_labels(
    federation: Federation,
    operation: Operation[MaskRequest, Any],
    key: paillier.PrivateKey,
    params: ScoringParams,
    rows: np.ndarray,
    labels: list,
    workers_cfg: int | None,
) -> list[list[list]]:
    """The first round-trip: the encrypted labels ``[[A]]`` of ``rows`` (made once, the same
    number per row) go to every party with ``params``; per party, per feature, the ciphertexts
    it packed."""
    replies = federation.broadcast(
        operation,
        operation.request(
            public_key=key.public.to_bytes(),
            labels=paillier.to_wire(labels, key.public.nbytes, (len(rows), -1)),
            rows=rows,
            params=params,
            workers=int(workers_cfg or 0),
        ),
    )
    return [by_feature(reply.packed, params.chunks) for reply in replies]


def by_feature(array: np.ndarray, per: int) -> list[list]:
    """The ciphertexts of a ``uint8`` array, ``per`` for each of its first axis' features."""
    flat = paillier.ciphertexts(array)
    return [flat[f * per : (f + 1) * per] for f in range(len(array))]


def send_scores(
    federation: Federation, operation: Operation[ScoresRequest, Any], scores: list[np.ndarray]
) -> None:
    """The last message: each party gets its own features' scores (nobody else's)."""
    federation.send(operation, {m: ScoresRequest(scores=s) for m, s in enumerate(scores)})
