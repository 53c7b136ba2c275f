"""The server's side of sample alignment (``dataset=party_files``), before any setup.

One round-trip of ECDH private set intersection (:mod:`vflfs.datasets.alignment`): the server
sends every party its labels file's IDs blinded with the run's fresh key (``query.align``); each
party returns them raised to its own key, its own blinded IDs (sorted by value) and its feature
count. The server raises the parties' points to its key, keeps the labels rows every party holds
and, per party, the positions of those samples in the party's sorted list; each party receives
only its own positions, in its setup message. What each side learns: docs/deployment.md.
"""

from __future__ import annotations

import logging
import uuid

import numpy as np
from omegaconf import OmegaConf

from vflfs.datasets.alignment import (
    AlignmentError,
    blind,
    check_points,
    intersect,
    new_key,
    overlap_report,
    raise_to_key,
)
from vflfs.federation import Federation, PartyError
from vflfs.ml.parallel import resolve_workers
from vflfs.protocol import ALIGN, AlignReply, AlignRequest

from .experiment import Experiment

log = logging.getLogger("vflfs")


def align_samples(federation: Federation, experiment: Experiment) -> Experiment:
    """Align the parties' files with the labels file; the experiment on the common samples."""
    assert experiment.labels is not None
    cfg, settings = experiment.cfg, experiment.settings.alignment
    key, alignment = new_key(), uuid.uuid4().hex
    workers = resolve_workers(settings.workers)
    points = blind(key, experiment.labels.ids, workers)
    paths = _party_paths(cfg, experiment.num_parties)
    requests = {
        m: AlignRequest(
            labels=points,
            alignment=alignment,
            id_column=str(cfg.dataset.id_column),
            workers=settings.workers,
            path=paths[m] if paths else None,
        )
        for m in range(experiment.num_parties)
    }
    replies = federation.send(ALIGN, requests)
    labels, own = _party_points(replies, len(points), key, workers)
    try:
        keep, rows = intersect(labels, own)
    except AlignmentError as error:
        if error.party is None:
            raise
        raise PartyError(error.party, ALIGN, str(error)) from error
    report = overlap_report(len(experiment.labels.ids), [len(p) for p in own], len(keep))
    minimum = settings.min_samples
    if len(keep) < minimum:
        raise AlignmentError(
            f"sample alignment found too few samples: {report}; alignment.min_samples is "
            f"{minimum}; fix: check that every file uses the same IDs, written the same way, "
            "and the ID column settings (dataset.id_column, node config id-column)"
        )
    log.info("alignment: %s", report)
    n_features = [int(replies[m].n_features) for m in range(experiment.num_parties)]
    return experiment.aligned(keep, rows, n_features, alignment)


def _party_points(
    replies: dict[int, AlignReply], n_labels: int, key: bytes, workers: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per party: the labels points under both keys (checked) and the party's own points
    raised to the server's ``key``."""
    labels, own = [], []
    for m in sorted(replies):
        try:
            labels.append(check_points(replies[m].labels, n_labels, f"party {m}", m))
            theirs = check_points(replies[m].ids, None, f"party {m}", m)
        except AlignmentError as error:
            raise PartyError(m, ALIGN, str(error)) from error
        own.append(raise_to_key(key, theirs, workers))
    return labels, own


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
