"""F-statistic filter (SPEC section 6): SFFS-style ANOVA F under encryption, keep the best.

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

import numpy as np
from omegaconf import DictConfig

from vflfs.federation import Federation
from vflfs.ml import paillier
from vflfs.ml.fstat import FStatParams, class_weights
from vflfs.ml.fstat_secure import server_finish, server_square
from vflfs.ml.gini_secure import encrypt_labels
from vflfs.ml.parallel import resolve_workers
from vflfs.server_app.experiment import Experiment

from .gini import classification_labels, config_values, scoring_phase
from .gini_filter import SelectThenTrain
from .result import RunResult

log = logging.getLogger("vflfs")


@dataclass(frozen=True)
class FStatConfig:
    """``strategy.fstat``: key size, value bits P, fixed-point bits E, mask bits, CPU workers."""

    key_bits: int = 2048
    value_bits: int = 16
    weight_bits: int = 56
    mask_bits: int = 40
    workers: int | None = None


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
    cfg = FStatConfig(**config_values(FStatConfig, cfg_fstat, "fstat"))
    rows, y = classification_labels(experiment, rows, "the F-statistic filter")
    c = experiment.task.n_classes
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
        )
        scores = _protocol(federation, key, params, rows, y, cfg.workers)
        log.info("secure F-statistic: %.1f s", time.perf_counter() - start)
    return scores


def _protocol(federation, key, params: FStatParams, rows, y, workers_cfg) -> list[np.ndarray]:
    workers, nbytes, c = resolve_workers(workers_cfg), key.public.nbytes, params.n_classes
    labels = encrypt_labels(key, y, c, workers)
    common = {**params.to_payload(), "workers": int(workers_cfg or 0)}
    replies = federation.broadcast(
        "query.fstat_mask",
        {
            "public_key": key.public.to_bytes(),
            "labels": paillier.to_array(labels, nbytes, (len(rows), c - 1)),
            "rows": rows,
            **common,
        },
    )
    weights, scale = class_weights(y, c)
    enc_weights = paillier.to_array([key.encrypt(v) for v in [*weights, scale]], nbytes)
    down = {}
    for m, reply in enumerate(replies):
        flat = paillier.from_array(reply["packed"])
        d = len(reply["packed"])
        packed = [flat[f * params.chunks : (f + 1) * params.chunks] for f in range(d)]
        ret = server_square(key, params, weights, packed, workers)
        returned = paillier.to_array([x for f in ret for x in f], nbytes, (d, c + 1))
        down[m] = {"returned": returned, "class_weights": enc_weights, **common}
    replies = federation.send("query.fstat_combine", down)
    scores = [
        server_finish(key, params, scale, paillier.from_array(replies[m]["values"]))
        for m in range(len(replies))
    ]
    federation.send("query.fstat_scores", {m: {"scores": s} for m, s in enumerate(scores)})
    return scores


class FStatFilter(SelectThenTrain):
    """Secure ANOVA F of every feature, keep the best ``keep_fraction``, then VFL."""

    name = "fstat_filter"
    phase = "fstat"
    lower_is_better = False

    def scores(
        self, federation: Federation, experiment: Experiment, result: RunResult
    ) -> list[np.ndarray]:
        return secure_fstat(federation, experiment, self.cfg.strategy.get("fstat"))
