"""The party side is a registry of operations.

An operation's handler is a function ``(session, request) -> reply`` registered for one
:class:`vflfs.protocol.Operation` (its typed request and reply; :mod:`vflfs.protocol`).
:mod:`vflfs.client_app.app` exposes every registered operation as a ClientApp action. Core
operations live in ``operations.py``; a strategy's own operations live in a module
``ops_<name>.py`` of this package. :data:`HOMES` names each operation's module (an operation
that ``protocol/<name>.py`` adds is served by ``ops_<name>.py``): the ClientApp imports it on
the operation's first message (:func:`registered`), so that a process serving one message
(deployment) loads only what that operation needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flwr.app.metadata import validate_message_type

from vflfs.protocol import (
    ADDED,
    ALIGN,
    FSTAT_COMBINE,
    FSTAT_MASK,
    FSTAT_SCORES,
    GINI_COMBINE,
    GINI_MASK,
    GINI_SCORES,
    IDENTIFY,
    IMPORTANCE,
    INFO,
    INIT_GATES,
    KEEP,
    LOCAL_SELECT,
    PENALTY,
    PRUNE,
    RESUME,
    SECURE_BACKWARD,
    SECURE_FORWARD,
    SECURE_SETUP,
    SECURE_STEP,
    SELECTION,
    SETUP,
    STEP,
    TRAIN_EMBEDDINGS,
    Body,
    Operation,
)

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

HOMES: dict[str, tuple[Operation, ...]] = {
    "operations": (INFO, SETUP, STEP, IMPORTANCE, KEEP, PENALTY, SELECTION),
    "ops_align": (ALIGN,),
    "ops_identity": (IDENTIFY,),
    "ops_resume": (RESUME,),
    "ops_gates": (INIT_GATES,),
    "ops_lasso": (TRAIN_EMBEDDINGS, LOCAL_SELECT, PRUNE),
    "ops_gini": (GINI_MASK, GINI_COMBINE, GINI_SCORES),
    "ops_fstat": (FSTAT_MASK, FSTAT_COMBINE, FSTAT_SCORES),
    "ops_secure": (SECURE_SETUP, SECURE_STEP, SECURE_FORWARD, SECURE_BACKWARD),
}
"""The module of this package that registers each operation's handler."""


def home(name: str) -> str:
    """The module of this package that registers operation ``name``'s handler: its entry in
    :data:`HOMES`, else ``ops_<module>`` for an operation that ``protocol/<module>.py`` adds
    (:data:`vflfs.protocol.ADDED`)."""
    homes = [m for m, ops in HOMES.items() if name in {o.name for o in ops}]
    if homes:
        return homes[0]
    if name in ADDED:
        return f"ops_{ADDED[name]}"
    raise ValueError(f"no party module serves operation {name!r}")


def registered(operation: Operation) -> Registered:
    """The handler of ``operation``, importing its module (:func:`home`) on first use.

    Operations compare by name: a ClientApp shipped to a Ray actor holds copies of them.
    """
    if operation.name not in OPERATIONS:
        import importlib

        importlib.import_module(f"{__name__.rsplit('.', 1)[0]}.{home(operation.name)}")
    return OPERATIONS[operation.name]


def load_operations() -> None:
    """Import every operations module of the package (``operations.py``, ``ops_*.py``)."""
    import importlib
    import pkgutil

    package = __name__.rsplit(".", 1)[0]
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if info.name == "operations" or info.name.startswith("ops_"):
            importlib.import_module(f"{package}.{info.name}")
