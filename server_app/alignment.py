"""The server's side of sample alignment (``dataset=party_files``), before any setup.

One round-trip: the server sends every party the run's random salt (``query.align``); each
party returns the salted hashes of its IDs and its feature count. The server intersects them
with the hashes of its labels file's IDs (:mod:`vflfs.datasets.alignment`) and keeps, per party,
the positions of its rows in the aligned order; each party receives only its own positions, in
its setup message. What each side learns: docs/deployment.md.
"""

from __future__ import annotations

import logging
import secrets
import uuid

from omegaconf import OmegaConf

from vflfs.datasets.alignment import (
    SALT_BYTES,
    AlignmentError,
    intersect,
    overlap_report,
    salted_hashes,
)
from vflfs.federation import Federation, PartyError

from .experiment import Experiment

log = logging.getLogger("vflfs")

ALIGN = "query.align"


def align_samples(federation: Federation, experiment: Experiment) -> Experiment:
    """Align the parties' files with the labels file; the experiment on the common samples."""
    assert experiment.labels is not None
    cfg = experiment.cfg
    salt = secrets.token_bytes(SALT_BYTES)
    key = uuid.uuid4().hex
    paths = _party_paths(cfg, experiment.num_parties)
    payloads = {
        m: {
            "salt": salt,
            "alignment": key,
            "id_column": str(cfg.dataset.id_column),
            **({"path": paths[m]} if paths else {}),
        }
        for m in range(experiment.num_parties)
    }
    replies = federation.send(ALIGN, payloads)
    hashes = [replies[m]["hashes"] for m in range(experiment.num_parties)]
    try:
        keep, rows = intersect(salted_hashes(salt, experiment.labels.ids), hashes)
    except AlignmentError as error:
        if error.party is None:
            raise
        raise PartyError(error.party, ALIGN, str(error)) from error
    report = overlap_report(len(experiment.labels.ids), [len(h) for h in hashes], len(keep))
    minimum = int(cfg.get("alignment", {}).get("min_samples", 10))
    if len(keep) < minimum:
        raise AlignmentError(
            f"sample alignment found too few samples: {report}; alignment.min_samples is "
            f"{minimum}; fix: check that every file uses the same IDs, written the same way, "
            "and the ID column settings (dataset.id_column, node config id-column)"
        )
    log.info("alignment: %s", report)
    n_features = [int(replies[m]["n_features"]) for m in range(experiment.num_parties)]
    return experiment.aligned(keep, rows, n_features, key)


def _party_paths(cfg, n: int) -> list[str] | None:
    """``dataset.party_paths`` (for nodes without a data-path), checked; None when unset."""
    paths = cfg.dataset.get("party_paths")
    if paths is None:
        return None
    paths = OmegaConf.to_container(paths) if OmegaConf.is_config(paths) else paths
    if not isinstance(paths, list) or len(paths) != n:
        raise AlignmentError(
            f"dataset.party_paths must list one file per party ({n}), got {paths!r}"
        )
    return [str(p) for p in paths]
