"""Riding out a party's short outage: which lost replies the server sends a request again for.

Flower answers for a party that is gone: a SuperNode that missed its heartbeats (paused,
cut off, killed) makes its pending request fail with ``NODE_UNAVAILABLE``, and an expired
request or reply comes back as ``MESSAGE_UNAVAILABLE`` or ``REPLY_MESSAGE_UNAVAILABLE``. For
these the :class:`~vflfs.federation.Federation` waits until the party's node is online again,
for at most ``federation.outage_timeout`` seconds from the first loss, and sends the same
request again (the same :class:`~vflfs.protocol.Delivery`, so a party that applied it already
answers with the reply it kept: :mod:`vflfs.client_app.replay`). A party that comes back
without its state (a restarted SuperNode: as the same node with SuperNode authentication, as a
new node without) cannot go on, and the run ends naming it. Any other Flower error (the
ClientApp crashed or raised) and every party's own failure end the run as before.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from flwr.app import Message
from flwr.common.constant import ErrorCode

log = logging.getLogger("vflfs")

LOST = frozenset(
    {
        ErrorCode.NODE_UNAVAILABLE,
        ErrorCode.MESSAGE_UNAVAILABLE,
        ErrorCode.REPLY_MESSAGE_UNAVAILABLE,
    }
)
LOST_STATE = "PartyNotReady"  # the failure of a party that has no state for this run


def lost(reply: Message) -> bool:
    """Whether ``reply`` is Flower's word that the request or its reply was lost in transit."""
    return reply.has_error() and int(reply.error.code) in LOST


@dataclass
class Outages:
    """The parties whose request was lost in the current exchange, and since when."""

    timeout: float  # seconds a party may stay unreachable (0: no re-sending)
    pause: float = 1.0  # seconds between two sends of the same request
    since: dict[int, float] = field(default_factory=dict)
    probed: set[int] = field(default_factory=set)  # new nodes asked which party they are

    def enabled(self) -> bool:
        return self.timeout > 0

    def begin(self, party: int) -> float:
        """Note the loss of ``party``'s request; when its outage began."""
        return self.since.setdefault(party, time.monotonic())

    def resent(self, party: int) -> bool:
        return party in self.since

    def expired(self, party: int) -> bool:
        return time.monotonic() > self.since[party] + self.timeout

    def ended(self, party: int) -> None:
        """``party`` answered: its outage, if any, is over."""
        began = self.since.pop(party, None)
        if began is not None:
            log.warning(
                "party %d answered again, %.0f s after its request was lost",
                party,
                time.monotonic() - began,
            )
