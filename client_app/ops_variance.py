"""Party operation of the variance filter: the variance of each of its features."""

from __future__ import annotations

import numpy as np
import torch

from vflfs.protocol import Empty
from vflfs.protocol.variance import VARIANCES, VariancesReply

from .registry import OPERATIONS
from .session import Session


@OPERATIONS.operation(VARIANCES)
def variances(session: Session, request: Empty) -> VariancesReply:
    """Each feature's variance over the training rows given at setup (its values are min-max
    scaled on those rows, so the variances compare across features)."""
    party = session.party
    rows = torch.as_tensor(np.array(party.train_rows, dtype=np.int64), device=party.device)
    X = party.X_all[rows].double()
    return VariancesReply(variances=X.var(dim=0, unbiased=False).cpu().numpy())
