"""Resuming a run from its checkpoint (:mod:`vflfs.strategies.checkpoint`): each party loads
the state it saved at the checkpoint's epoch boundary (:mod:`vflfs.client_app.store`)."""

from __future__ import annotations

from dataclasses import dataclass

from .body import Body, Operation


@dataclass(frozen=True)
class ResumeRequest(Body):
    """The party's setup ``nonce`` and the gradient ``steps`` it had taken at the checkpoint,
    which came after epoch ``epoch``."""

    nonce: str
    steps: int
    epoch: int


@dataclass(frozen=True)
class ResumeReply(Body):
    """The gradient steps of the state the party loaded."""

    steps: int


RESUME = Operation("query.resume", ResumeRequest, ResumeReply)
