"""Party operation of the path's screening: the score test of each feature its model does not
use (:mod:`vflfs.ml.screening`), from the gradients the server sends for its training rows."""

from __future__ import annotations

import numpy as np
import torch

from vflfs.ml.screening import first_layer_gradients, score_test
from vflfs.protocol.screening import SCREEN, ScreenReply, ScreenRequest

from .registry import OPERATIONS
from .session import Session


@OPERATIONS.operation(SCREEN)
def screen(session: Session, request: ScreenRequest) -> ScreenReply:
    """The score test of every feature the model does not use, over the training rows given
    at setup (the gradients come in their order); the features in use are not tested (NaN).
    Nothing but one p-value per feature leaves the party."""
    party = session.party
    rows = torch.as_tensor(np.array(party.train_rows, dtype=np.int64), device=party.device)
    grad = torch.as_tensor(np.asarray(request.gradients), device=party.device)
    if grad.shape != (len(rows), len(party.components)):
        raise ValueError(
            f"got gradients of shape {tuple(grad.shape)} for {len(rows)} training rows and "
            f"{len(party.components)} embedding components; the server and party are out of step"
        )
    pvalues = np.full(party.n_features, np.nan)
    dof = 0.0
    unused = np.setdiff1d(np.arange(party.n_features), party.features)
    if unused.size and party.features.size:
        delta = first_layer_gradients(
            party.model, party.model.input_layer, party.X[rows], grad.to(party.X.dtype)
        )
        columns = party.X_all[rows][:, torch.as_tensor(unused, device=party.device)]
        pvalues[unused], dof = score_test(columns, delta)
    return ScreenReply(pvalues=pvalues, dof=float(dof))
