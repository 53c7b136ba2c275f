"""The party's last applied request and its reply, so that a repeated request is not applied
twice.

After an outage the server sends a lost request again with the same
:class:`~vflfs.protocol.Delivery` (its session and step number). The party keeps, in
``context.state``, the delivery of the last request it applied and the reply it gave (as Flower
encodes it): a repeat of that request gets that reply again, unchanged, and changes nothing;
an older request (a stale copy overtaken by later ones) is refused. Only successful replies are
kept: a failed operation changed nothing (:meth:`~.session.Session.discard`), so a repeat of it
runs again.
"""

from __future__ import annotations

from flwr.app import ConfigRecord, Context, RecordDict
from flwr.common.serde import recorddict_from_proto, recorddict_to_proto
from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict

from vflfs.protocol import Delivery

RECORD = "vflfs.replay"


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
    proto = ProtoRecordDict()
    proto.ParseFromString(bytes(context.state[RECORD]["reply"]))
    return recorddict_from_proto(proto)


def keep(context: Context, delivery: Delivery | None, operation: str, reply: RecordDict) -> None:
    """Remember ``reply`` as this party's answer to ``delivery`` (its last applied request)."""
    if delivery is None:
        return
    context.state[RECORD] = ConfigRecord(
        {
            "session": delivery.session,
            "step": delivery.step,
            "operation": operation,
            "reply": recorddict_to_proto(reply).SerializeToString(),
        }
    )
