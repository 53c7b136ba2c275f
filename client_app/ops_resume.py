"""Resuming a run: the party loads the state it saved at the server's checkpoint."""

from __future__ import annotations

import logging

from vflfs.protocol import RESUME, ResumeReply, ResumeRequest

from . import store
from .registry import OPERATIONS
from .session import Session

log = logging.getLogger("vflfs")


@OPERATIONS.operation(RESUME)
def resume(session: Session, request: ResumeRequest) -> ResumeReply:
    """Load the saved state of setup ``nonce`` after ``steps`` gradient steps into
    ``context.state`` (:mod:`vflfs.client_app.store`); a party holding another refuses, naming
    what it holds."""
    steps = int(request.steps)
    # the next message rebuilds the party from the records loaded
    session.store.replace(store.read_snapshot(session.context, str(request.nonce), steps))
    log.info(
        "party %d: resuming after epoch %d at step %d",
        session.partition_id,
        int(request.epoch),
        steps,
    )
    return ResumeReply(steps=steps)
