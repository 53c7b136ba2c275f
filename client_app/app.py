"""The vflfs ClientApp: one Flower action per registered party operation."""

from __future__ import annotations

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from vflfs.federation.payload import decode, encode, encode_error

from .errors import report_failure
from .registry import OPERATIONS, Registered, load_operations
from .session import Session


def _handler(op: Registered):
    def handle(msg: Message, context: Context) -> Message:
        session = Session(context)
        try:
            request = op.operation.request.from_payload(decode(msg.content))
            reply = op.fn(session, request)
            if not isinstance(reply, op.operation.reply):
                raise TypeError(
                    f"{op.message_type!r} answered a {type(reply).__name__}, not its "
                    f"{op.operation.reply.__name__}"
                )
            session.save()
            return Message(encode(reply.to_payload()), reply_to=msg)
        except Exception as error:  # noqa: BLE001 - reported to the server, which raises
            session.discard()
            report = report_failure(context, op.message_type, error)
            return Message(encode_error(report), reply_to=msg)

    handle.__name__ = op.message_type.replace(".", "_")
    return handle


def build_client_app() -> ClientApp:
    """A ClientApp exposing every operation in the registry."""
    load_operations()
    client_app = ClientApp()
    for op in OPERATIONS:
        register = getattr(client_app, op.operation.category)
        register(op.operation.action)(_handler(op))
    return client_app


app = build_client_app()
