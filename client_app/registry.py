"""The party side is a registry of named operations.

An operation is a function ``(session, payload) -> payload`` registered under a Flower
message type (``"train.step"``, ``"query.embed"``...). :mod:`vflfs.client_app.app` exposes every
registered operation as a ClientApp action. Core operations live in ``operations.py``; a
strategy's own operations live in a module ``ops_<name>.py`` of this package, found at start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flwr.app.metadata import validate_message_type

if TYPE_CHECKING:
    from vflfs.federation import Payload

    from .session import Session

Operation = Callable[["Session", "Payload"], "Payload"]


@dataclass(frozen=True)
class Registered:
    message_type: str
    fn: Operation


class Registry:
    """Operations by Flower message type."""

    def __init__(self) -> None:
        self._ops: dict[str, Registered] = {}

    def operation(self, message_type: str) -> Callable[[Operation], Operation]:
        """Decorator: register ``fn`` as the party's handler of ``message_type``."""
        if not validate_message_type(message_type):
            raise ValueError(
                f"invalid message type {message_type!r}: use '<train|evaluate|query>.<name>'"
            )

        def register(fn: Operation) -> Operation:
            if message_type in self._ops:
                raise ValueError(f"operation {message_type!r} is already registered")
            self._ops[message_type] = Registered(message_type, fn)
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
