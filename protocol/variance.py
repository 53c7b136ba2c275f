"""Operation of the variance filter (``strategy=variance_filter``): each party's feature variances.

Declared here alone: :data:`vflfs.protocol.OPERATIONS` adds it, and the party's handler is in
``client_app/ops_variance.py`` (the module named after this one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .body import Body, Empty, Operation


@dataclass(frozen=True)
class VariancesReply(Body):
    """One variance per feature of the party's full set, over its training rows."""

    variances: np.ndarray


VARIANCES = Operation("query.variances", Empty, VariancesReply)
