"""Secure Gini importance of every party's features: FedSDG-FS Algorithm 1 as a protocol phase.

Li et al. 2023, "FedSDG-FS: Efficient and Secure Feature Selection for Vertical Federated
Learning", INFOCOM, Algorithm 1, with Erkin et al.'s masked squaring (PETS 2009); spec section 4.
The server makes a Paillier key pair and encrypts the one-hot labels of the training rows once;
each party bins its features, sums the encrypted labels per bin (additions only), masks and packs
the counts; the server squares what it decrypts (masked values only) and returns [[sum_k u^2]] per
bin; the party turns that into [[sum_i w_i sum_k n_ik^2]]; the server decrypts it and finishes
G(f) = 1 - Q / (N 2^F). Three round-trips in the ``gini`` traffic phase; each party ends up
holding its own scores, and :func:`secure_gini` returns every party's (the server's view).

What each side learns: the server, every feature's G and masked values u = n + r whose masks
are 2^mask_bits times wider than any count (statistically hiding); a party, nothing about the
labels but its own features' G (see docs/secure_gini.md). Cost: docs/secure_gini.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from omegaconf import DictConfig

from vflfs.federation import Federation
from vflfs.ml import paillier
from vflfs.ml.gini import GiniParams
from vflfs.ml.gini_secure import encrypt_labels, server_finish, server_square
from vflfs.ml.parallel import resolve_workers
from vflfs.protocol import GINI_COMBINE, GINI_MASK, GINI_SCORES, GiniCombineRequest
from vflfs.runtime.config import ConfigError
from vflfs.server_app.experiment import Experiment

from .secure_scoring import (
    PhaseProgress,
    SectionConfig,
    scoring_labels,
    scoring_phase,
    send_labels,
    send_scores,
)

log = logging.getLogger("vflfs")


@dataclass(frozen=True)
class GiniConfig(SectionConfig):
    """``strategy.gini``: bins b and fixed-point bits F, with the shared settings of
    :class:`~vflfs.strategies.secure_scoring.SectionConfig`."""

    section: ClassVar[str] = "gini"
    bins: int = 10
    weight_bits: int = 52


def secure_gini(
    federation: Federation,
    experiment: Experiment,
    cfg_gini: Mapping | DictConfig | None = None,
    *,
    keys: paillier.PrivateKey | None = None,
    rows: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Every party's Gini scores, per party one value per feature of its full set.

    The parties must be set up (``query.setup``). ``cfg_gini``: :class:`GiniConfig` keys.
    ``keys`` (default: a fresh pair) and ``rows`` (default: the training rows) are for tests and
    benchmarks. Each party also keeps its own scores (``client_app.scoring.stored_scores``).
    """
    cfg = GiniConfig.from_cfg(cfg_gini)
    rows, y, n_classes = scoring_labels(experiment, rows, cfg.target_classes)
    with scoring_phase(federation, "gini"):
        start = time.perf_counter()
        key = keys or paillier.generate_keys(cfg.key_bits)
        params = GiniParams(
            bins=cfg.bins,
            n_classes=n_classes,
            rows=len(rows),
            weight_bits=cfg.weight_bits,
            mask_bits=cfg.mask_bits,
            key_bits=key.public.bits,
            djn=cfg.randomness == "djn",
        )
        progress = PhaseProgress("secure Gini", experiment, len(rows), n_classes, params.key_bits)
        scores = _protocol(federation, key, params, rows, y, cfg.workers, progress)
        # features and key size: in PhaseProgress's first line
        log.info("secure Gini: %s randomness, %.1f s", cfg.randomness, time.perf_counter() - start)
    return scores


def _protocol(
    federation: Federation,
    key: paillier.PrivateKey,
    params: GiniParams,
    rows: np.ndarray,
    y: np.ndarray,
    workers_cfg: int | None,
    progress: PhaseProgress,
) -> list[np.ndarray]:
    workers = resolve_workers(workers_cfg)
    nbytes = key.public.nbytes
    labels = encrypt_labels(key, y, params, workers)
    progress.step("labels encrypted")
    packed = send_labels(federation, GINI_MASK, key, params, rows, labels, workers_cfg, progress)
    squares = {}
    for m, per_feature in enumerate(packed):
        sq = server_square(key, params, per_feature, workers)
        squares[m] = paillier.to_wire(
            [c for feature in sq for c in feature], nbytes, (len(sq), params.returned)
        )
    progress.step("masked counts squared")
    replies = federation.send(
        GINI_COMBINE,
        {
            m: GiniCombineRequest(squares=s, workers=int(workers_cfg or 0))
            for m, s in squares.items()
        },
    )
    progress.step("the parties' weighted sums received")
    scores = [
        server_finish(
            key, params, paillier.ciphertexts(replies[m].weighted), len(packed[m]), workers
        )
        for m in range(len(replies))
    ]
    send_scores(federation, GINI_SCORES, scores)
    progress.step("scores decrypted and sent to their parties")
    return scores


def global_ranks(scores: list[np.ndarray], lower_is_better: bool = True) -> list[np.ndarray]:
    """Each party's features' ranks among all parties' (0 = most important; ties: party order)."""
    flat = np.concatenate([np.asarray(s, dtype=np.float64) for s in scores])
    key = flat if lower_is_better else -flat
    key = np.where(np.isnan(key), np.inf, key)
    ranks = np.empty(len(flat), dtype=np.int64)
    ranks[np.argsort(key, kind="stable")] = np.arange(len(flat))
    bounds = np.cumsum([0, *[len(s) for s in scores]])
    return [ranks[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def keep_best(
    scores: list[np.ndarray], fraction: float, lower_is_better: bool = True
) -> list[np.ndarray]:
    """Local indices each party keeps: the best ``fraction`` of all features by global rank
    (at least one feature per party, its best, so that no party is left without input)."""
    if not 0 < fraction <= 1:
        raise ConfigError(f"strategy.keep_fraction must be in (0, 1], got {fraction}")
    ranks = global_ranks(scores, lower_is_better)
    k = max(1, int(round(fraction * sum(len(s) for s in scores))))
    kept = []
    for r in ranks:
        mine = np.flatnonzero(r < k)
        kept.append(mine if mine.size or not r.size else np.asarray([int(np.argmin(r))]))
    return kept
