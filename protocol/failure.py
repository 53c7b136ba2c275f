"""What a party tells the server when one of its operations fails (:mod:`vflfs.client_app.errors`
decides what the text may say)."""

from __future__ import annotations

from dataclasses import dataclass

from .body import Body


@dataclass(frozen=True)
class Failure(Body):
    """The failed operation, the error's type, and a message naming the problem and the fix."""

    operation: str
    type: str
    message: str
