"""What the server side of the secure scoring phases shares (Gini, F-statistic).

Both phases (:mod:`vflfs.strategies.gini`, :mod:`vflfs.strategies.fstat_filter`) read integer
settings from a ``strategy.<section>``, score the training rows' class labels (a regression
target's quantile classes), send them once to every party encrypted under a fresh Paillier key,
get back per feature the party's packed masked ciphertexts, and end by giving each party its
own scores. What happens in between is each protocol's own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self

import numpy as np
from omegaconf import DictConfig

from vflfs.federation import Federation
from vflfs.ml import paillier
from vflfs.protocol import MaskRequest, Operation, ScoresRequest
from vflfs.runtime.config import ConfigError
from vflfs.server_app.experiment import Experiment

from .settings import RANDOMNESS, typed

log = logging.getLogger("vflfs")


class ScoringParams(Protocol):
    """The public parameters of a scoring protocol (``GiniParams``, ``FStatParams``)."""

    n_classes: int

    @property
    def chunks(self) -> int: ...


@dataclass(frozen=True)
class SectionConfig:
    """Base of a scoring phase's ``strategy.<section>`` of settings (``GiniConfig``,
    ``FStatConfig``): what both protocols share. Randomness ``djn``: short-exponent
    ``h_s^alpha``, DJN's assumption (docs/secure_gini.md); ``full``: ``r^n``."""

    section: ClassVar[str]
    key_bits: int = 2048
    mask_bits: int = 40
    randomness: str = "djn"
    workers: int | None = None  # None / 0: every CPU
    target_classes: int = 5  # a regression target's quantile classes (:func:`scoring_labels`)

    def __post_init__(self) -> None:
        if self.randomness not in RANDOMNESS:
            raise ConfigError(
                f"strategy.{self.section}.randomness must be one of {RANDOMNESS}, "
                f"got {self.randomness!r}"
            )
        if self.target_classes < 2:
            raise ConfigError(
                f"strategy.{self.section}.target_classes must be >= 2, got {self.target_classes}"
            )

    @classmethod
    def from_cfg(cls, cfg: Mapping | DictConfig | None) -> Self:
        """The section typed (:func:`~vflfs.strategies.settings.typed`): the defaults for the
        missing keys, typos and values of the wrong type rejected, naming the key."""
        return typed(cls, cfg, f"strategy.{cls.section}")


class PhaseProgress:
    """A secure scoring phase's progress in the log: what it scores when it starts, then each
    step as it ends, with the step's seconds. With many classes, rows or features a phase runs
    for minutes before the first epoch (docs/secure_gini.md)."""

    def __init__(
        self, name: str, experiment: Experiment, rows: int, n_classes: int, key_bits: int
    ) -> None:
        self.name = name
        self.last = time.perf_counter()
        log.info(
            "%s: %d features, %d training rows, %d classes, %d-bit key",
            name,
            sum(len(columns) for columns in experiment.columns),
            rows,
            n_classes,
            key_bits,
        )

    def step(self, done: str) -> None:
        """Log that the step ``done`` ended, with its seconds."""
        now = time.perf_counter()
        log.info("%s: %s (%.1f s)", self.name, done, now - self.last)
        self.last = now


def scoring_phase(federation: Federation, phase: str):
    """The traffic phase ``phase``, unless the caller already opened it (no double count)."""
    if federation.traffic.phase == phase:
        return nullcontext()
    return federation.traffic.in_phase(phase)


def scoring_labels(
    experiment: Experiment, rows: np.ndarray | None, target_classes: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """The training rows, their class ids and the number of classes the scores are taken over.

    A regression target is cut at its training rows' quantiles into ``target_classes`` classes
    of about equal size (:func:`quantile_classes`): a feature's Gini impurity or ANOVA F over
    them measures how much its values say about the target's level, as they do for classes.
    The cut is the server's, like the labels; the parties see only their encryption.
    """
    rows = experiment.splits.train if rows is None else rows
    rows = np.asarray(rows, dtype=np.int64)
    y = np.asarray(experiment.y)[rows]
    if experiment.task.kind == "classification":
        return rows, y.astype(np.int64), experiment.task.n_classes
    classes, n = quantile_classes(y, target_classes)
    return rows, classes, n


def quantile_classes(y: np.ndarray, k: int) -> tuple[np.ndarray, int]:
    """``y`` cut at its ``1/k, ..., (k-1)/k`` quantiles: class ids 0..n-1 and n (fewer than
    ``k`` where ties merge quantiles: a target of few distinct values keeps one class per
    value). A constant target cannot be scored and is refused."""
    y = np.asarray(y, dtype=np.float64)
    edges = np.unique(np.quantile(y, np.arange(1, k) / k))
    _, classes = np.unique(np.searchsorted(edges, y, side="right"), return_inverse=True)
    n = int(classes.max()) + 1 if len(classes) else 0
    if n < 2:
        raise ConfigError(
            "the regression target is constant on the training rows, so no feature can be "
            "scored against it; fix: check the label column"
        )
    return classes.astype(np.int64), n


def send_labels(
    federation: Federation,
    operation: Operation[MaskRequest, Any],
    key: paillier.PrivateKey,
    params: ScoringParams,
    rows: np.ndarray,
    labels: list,
    workers_cfg: int | None,
    progress: PhaseProgress,
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
    progress.step("the parties' masked counts received")
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
