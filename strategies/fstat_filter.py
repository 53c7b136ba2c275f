"""F-statistic filter (spec section 6): SFFS-style ANOVA F under encryption, keep the best.

The SFFS baseline of Li et al. 2023, "FedSDG-FS: Efficient and Secure Feature Selection for
Vertical Federated Learning", INFOCOM (Sec. VI): every feature scored by its one-way ANOVA
F-statistic, the best ``keep_fraction`` of all features kept, then standard VFL. Mode: labels
under encryption (the only mode). The statistic needs the class sums of each feature, which
neither side may see; :mod:`vflfs.ml.fstat_secure` computes it from the server's encrypted
one-hot labels with the masked squaring of the secure Gini (Erkin et al., PETS 2009).

Leak profile: the server learns each feature's F (as rho = SSB / SST, nothing else: the masked
class sums are statistically hidden, and the party divides by its own variance before the
server decrypts); a party learns nothing about the labels but its own features' F, which it
receives at the end. Three round-trips in the ``fstat`` traffic phase.
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
from vflfs.ml.fstat import FStatParams, class_weights
from vflfs.ml.fstat_secure import encrypt_labels, server_finish, server_square
from vflfs.ml.parallel import resolve_workers
from vflfs.protocol import FSTAT_COMBINE, FSTAT_MASK, FSTAT_SCORES, FStatCombineRequest
from vflfs.server_app.experiment import Experiment

from .gini_filter import SelectThenTrain
from .registry import register
from .result import RunResult
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
class FStatConfig(SectionConfig):
    """``strategy.fstat``: value bits P and fixed-point bits E, with the shared settings of
    :class:`~vflfs.strategies.secure_scoring.SectionConfig`."""

    section: ClassVar[str] = "fstat"
    value_bits: int = 16
    weight_bits: int = 56


def secure_fstat(
    federation: Federation,
    experiment: Experiment,
    cfg_fstat: Mapping | DictConfig | None = None,
    *,
    keys: paillier.PrivateKey | None = None,
    rows: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Every party's features' ANOVA F-statistics (larger = more important), the server's view;
    each party also keeps its own. The parties must be set up."""
    cfg = FStatConfig.from_cfg(cfg_fstat)
    rows, y, c = scoring_labels(experiment, rows, cfg.target_classes)
    with scoring_phase(federation, "fstat"):
        start = time.perf_counter()
        key = keys or paillier.generate_keys(cfg.key_bits)
        params = FStatParams(
            n_classes=c,
            rows=len(rows),
            classes_present=int((np.bincount(y, minlength=c) > 0).sum()),
            value_bits=cfg.value_bits,
            weight_bits=cfg.weight_bits,
            mask_bits=cfg.mask_bits,
            key_bits=key.public.bits,
            djn=cfg.randomness == "djn",
        )
        progress = PhaseProgress("secure F-statistic", experiment, len(rows), c, params.key_bits)
        scores = _protocol(federation, key, params, rows, y, cfg.workers, progress)
        log.info("secure F-statistic: %.1f s", time.perf_counter() - start)
    return scores


def _protocol(
    federation, key, params: FStatParams, rows, y, workers_cfg, progress: PhaseProgress
) -> list[np.ndarray]:
    workers, nbytes, c = resolve_workers(workers_cfg), key.public.nbytes, params.n_classes
    labels = encrypt_labels(key, y, params, workers)
    progress.step("labels encrypted")
    packed = send_labels(federation, FSTAT_MASK, key, params, rows, labels, workers_cfg, progress)
    weights, scale = class_weights(y, c)
    enc = [paillier.owner_encrypt(key, v, params.djn) for v in [*weights, scale]]
    enc_weights = paillier.to_wire(enc, nbytes)
    down = {}
    for m, per_feature in enumerate(packed):
        ret = server_square(key, params, weights, per_feature, workers)
        returned = paillier.to_wire([x for f in ret for x in f], nbytes, (len(per_feature), c + 1))
        down[m] = FStatCombineRequest(
            returned=returned,
            class_weights=enc_weights,
            params=params,
            workers=int(workers_cfg or 0),
        )
    progress.step("masked class sums squared")
    replies = federation.send(FSTAT_COMBINE, down)
    progress.step("the parties' weighted sums received")
    scores = [
        server_finish(key, params, scale, paillier.ciphertexts(replies[m].values), len(packed[m]))
        for m in range(len(replies))
    ]
    send_scores(federation, FSTAT_SCORES, scores)
    progress.step("scores decrypted and sent to their parties")
    return scores


@register
class FStatFilter(SelectThenTrain):
    """Secure ANOVA F of every feature, keep the best ``keep_fraction``, then VFL."""

    name = "fstat_filter"
    phase = "fstat"
    lower_is_better = False

    def scores(
        self, federation: Federation, experiment: Experiment, result: RunResult
    ) -> list[np.ndarray]:
        return secure_fstat(federation, experiment, self.cfg.strategy.get("fstat"))
