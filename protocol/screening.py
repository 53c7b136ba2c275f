"""Operation of the regularisation path's screening: each party's score test of the features
its model does not use (:mod:`vflfs.ml.screening`).

Declared here alone: :data:`vflfs.protocol.OPERATIONS` adds it, and the party's handler is in
``client_app/ops_screening.py`` (the module named after this one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .body import Body, Operation


@dataclass(frozen=True)
class ScreenRequest(Body):
    """The loss's gradient with respect to the embedding of every training row (the rows
    given at setup, in their order), at the model the party holds: the gradients of training,
    for all its rows at once."""

    gradients: np.ndarray


@dataclass(frozen=True)
class ScreenReply(Body):
    """Per feature of the party's full set: the p-value of the score test of adding it to
    the model (NaN for the features the model uses), and the test's degrees of freedom."""

    pvalues: np.ndarray
    dof: float


SCREEN = Operation("query.screen", ScreenRequest, ScreenReply)
