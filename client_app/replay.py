"""The party's last applied request and its reply, so that a repeated request is not applied
twice.

After an outage the server sends a lost request again with the same
:class:`~vflfs.protocol.Delivery` (its session and step number). The party keeps, in
``context.state``, the delivery of the last request it applied and the reply it gave (its
records): a repeat of that request gets that reply again, unchanged, and changes nothing;
an older request (a stale copy overtaken by later ones) is refused. Only successful replies are
kept: a failed operation changed nothing (:meth:`~.session.Session.discard`), so a repeat of it
runs again.
"""

from __future__ import annotations

from flwr.app import ConfigRecord, Context, RecordDict

from vflfs.protocol import Delivery

RECORD = "vflfs.replay"
REPLY = "vflfs.replay.reply."  # + each of the reply's record names


class StaleRequest(RuntimeError):
    """A request older than the last one this party applied."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.public = message  # step numbers only


def last(context: Context) -> tuple[Delivery, str] | None:
    """The delivery and operation name of the last request this party applied."""
    record = context.state.get(RECORD)
    if record is None:
        return None
    return Delivery(str(record["session"]), int(record["step"])), str(record["operation"])


def kept_reply(context: Context, delivery: Delivery | None, operation: str) -> RecordDict | None:
    """The reply this party gave to ``delivery`` if it applied it already, else None (apply it).

    Raises :class:`StaleRequest` for an older request of the same session, and
    :class:`ValueError` when the same step number arrives for another operation.
    """
    held = last(context)
    if delivery is None or held is None or held[0].session != delivery.session:
        return None
    applied, applied_operation = held
    if delivery.step > applied.step:
        return None
    if delivery.step < applied.step:
        raise StaleRequest(
            f"a stale copy of request {delivery.step} ({operation!r}) arrived after request "
            f"{applied.step}; it was not applied"
        )
    if applied_operation != operation:
        raise ValueError(
            f"request {delivery.step} arrived as {operation!r}, but this party applied it as "
            f"{applied_operation!r}; the server and party are out of step"
        )
    if "reply" in context.state[RECORD]:
        raise ValueError(
            "this party's last reply was kept by an older vflfs; fix: start the run afresh "
            "(rerun=true)"
        )
    state = context.state
    return RecordDict({n[len(REPLY) :]: state[n] for n in state if n.startswith(REPLY)})


def keep(context: Context, delivery: Delivery | None, operation: str, reply: RecordDict) -> None:
    """Remember ``reply`` as this party's answer to ``delivery`` (its last applied request)."""
    if delivery is None:
        return
    state = context.state
    for name in [n for n in state if n.startswith(REPLY)]:
        del state[name]
    for name, record in reply.items():  # the records sent (a copy travels; these stay)
        state[REPLY + name] = record
    state[RECORD] = ConfigRecord(
        {"session": delivery.session, "step": delivery.step, "operation": operation}
    )
