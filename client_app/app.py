"""The vflfs ClientApp: one Flower action per operation of the protocol.

Each action's handler is imported on its first message (:func:`~.registry.registered`): in
deployment every message runs in a fresh process, which then loads only that operation's
code and libraries. A request the server sends again after an outage, which this party has
applied already, gets the reply it gave then (:mod:`.replay`).
"""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from vflfs.federation.payload import decode, encode, encode_error
from vflfs.protocol import OPERATIONS, Delivery, Operation

from . import replay
from .errors import report_failure
from .registry import registered


def _handler(operation: Operation):
    def handle(msg: Message, context: Context) -> Message:
        from .session import Session

        session = Session(context)
        delivery = Delivery.parse(msg.metadata.group_id)
        try:
            kept = replay.kept_reply(context, delivery, operation.name)
            if kept is not None:  # a request sent again after an outage: applied already
                return Message(kept, reply_to=msg)
            op = registered(operation)
            request = operation.request.from_payload(decode(msg.content))
            reply = op.fn(session, request)
            if not isinstance(reply, operation.reply):
                raise TypeError(
                    f"{operation.name!r} answered a {type(reply).__name__}, not its "
                    f"{operation.reply.__name__}"
                )
            session.save()
            content = encode(reply.to_payload())
            replay.keep(context, delivery, operation.name, content)
            return Message(content, reply_to=msg)
        except Exception as error:  # noqa: BLE001 - reported to the server, which raises
            session.discard()
            report = report_failure(context, operation.name, error)
            return Message(encode_error(report), reply_to=msg)

    handle.__name__ = operation.name.replace(".", "_")
    return handle


def build_client_app(mods: list | None = None) -> ClientApp:
    """A ClientApp exposing every operation of the protocol (``mods``: Flower mods wrapping
    every handler)."""
    client_app = ClientApp(mods=mods)
    for operation in OPERATIONS:
        register = getattr(client_app, operation.category)
        register(operation.action)(_handler(operation))
    return client_app


app = build_client_app()
