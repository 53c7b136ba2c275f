"""The party side is a registry of operations.

An operation's handler is a function ``(session, request) -> reply`` registered for one
:class:`vflfs.protocol.Operation` (its typed request and reply; :mod:`vflfs.protocol`).
:mod:`vflfs.client_app.app` exposes every registered operation as a ClientApp action. Core
operations live in ``operations.py``; a strategy's own operations live in a module
``ops_<name>.py`` of this package, found at start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flwr.app.metadata import validate_message_type

from vflfs.protocol import Body, Operation

if TYPE_CHECKING:
    from .session import Session

Handler = Callable[["Session", Any], Body]


@dataclass(frozen=True)
class Registered:
    operation: Operation
    fn: Handler

    @property
    def message_type(self) -> str:
        return self.operation.name


class Registry:
    """Handlers by Flower message type."""

    def __init__(self) -> None:
        self._ops: dict[str, Registered] = {}

    def operation(self, operation: Operation) -> Callable[[Handler], Handler]:
        """Decorator: register ``fn`` as the party's handler of ``operation``."""
        message_type = operation.name
        if not validate_message_type(message_type):
            raise ValueError(
                f"invalid message type {message_type!r}: use '<train|evaluate|query>.<name>'"
            )

        def register(fn: Handler) -> Handler:
            if message_type in self._ops:
                raise ValueError(f"operation {message_type!r} is already registered")
            self._ops[message_type] = Registered(operation, fn)
            return fn

        return register

    def __getitem__(self, message_type: str) -> Registered:
        return self._ops[message_type]

    def __iter__(self) -> Iterator[Registered]:
        return iter(self._ops.values())

    def __contains__(self, message_type: str) -> bool:
        return message_type in self._ops


OPERATIONS = Registry()


def load_operations() -> None:
    """Import every operations module of the package (``operations.py``, ``ops_*.py``)."""
    import importlib
    import pkgutil

    package = __name__.rsplit(".", 1)[0]
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if info.name == "operations" or info.name.startswith("ops_"):
            importlib.import_module(f"{package}.{info.name}")
