"""Party operation of the variance filter: the variance of each of its features."""

from __future__ import annotations

from vflfs.protocol import Empty
from vflfs.protocol.variance import VARIANCES, VariancesReply

from .registry import OPERATIONS
from .session import Session


@OPERATIONS.operation(VARIANCES)
def variances(session: Session, request: Empty) -> VariancesReply:
    """Each feature's variance over the training rows given at setup (its values are min-max
    scaled on those rows, so the variances compare across features)."""
    party = session.party
    X = party.X_all[party.train_rows].double()
    return VariancesReply(variances=X.var(dim=0, unbiased=False).cpu().numpy())
