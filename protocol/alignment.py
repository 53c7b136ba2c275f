"""The sample alignment operation (``dataset=party_files``; :mod:`vflfs.datasets.alignment`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .body import Body, Operation


@dataclass(frozen=True)
class AlignRequest(Body):
    """The labels file's IDs blinded with the run's key, the run's ``alignment`` id, the ID
    column's default name, CPU workers, and the party's file where its node config names none
    (``dataset.party_paths``)."""

    labels: np.ndarray
    alignment: str
    id_column: str = "id"
    workers: int | None = None
    path: str | None = None


@dataclass(frozen=True)
class AlignReply(Body):
    """The server's points raised to the party's key, the party's own blinded IDs (sorted by
    value) and its column count."""

    labels: np.ndarray
    ids: np.ndarray
    n_features: int


ALIGN = Operation("query.align", AlignRequest, AlignReply)
