"""Which request a message is: the server's session and the request's step number.

Every request the server sends carries a :class:`Delivery` in its Flower message's
``group_id``: a session token drawn once per :class:`~vflfs.federation.Federation` and the
number of the exchange it belongs to (one number per round-trip, rising). A request the server
sends again after an outage carries the same delivery, so a party that already applied it
answers with the reply it kept instead of applying it twice
(:mod:`vflfs.client_app.replay`). A message without one (another sender) is applied as it comes.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "vflfs:"


@dataclass(frozen=True, order=True)
class Delivery:
    """Request ``step`` of the server session ``session``."""

    session: str
    step: int

    @property
    def group_id(self) -> str:
        """The Flower ``group_id`` that carries it."""
        return f"{PREFIX}{self.session}:{self.step}"

    @classmethod
    def parse(cls, group_id: str) -> Delivery | None:
        """The delivery in a message's ``group_id``; None when it carries none."""
        if not group_id.startswith(PREFIX):
            return None
        session, sep, step = group_id[len(PREFIX) :].rpartition(":")
        if not sep or not session or not step.isdigit():
            return None
        return cls(session, int(step))

    def __str__(self) -> str:
        return f"step {self.step} of session {self.session}"
