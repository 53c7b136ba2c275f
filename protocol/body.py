"""Typed protocol messages: every request and reply is a frozen dataclass of its entries.

A message's fields are its payload's entries (:mod:`vflfs.federation.payload` turns payloads
into Flower records): arrays, lists of arrays and config scalars. A field that is ``None``,
or ``False`` where its default is ``False``, does not travel; the receiver reads its default.
Two field kinds change the encoding: :func:`json_field` (a dict sent as one JSON string) and
:func:`flat_field` (a dataclass of scalars sent as one entry per field, under a prefix).
Decoding checks that every required entry is there and no unknown one is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from typing import Any, Generic, Self, TypeVar

Payload = dict[str, Any]

_JSON = "vflfs.json"
_FLAT = "vflfs.flat"  # (dataclass, prefix, cast)
SAME_VERSION = "run the same vflfs version on the server and every party"


class ProtocolError(ValueError):
    """A message that does not match its operation's request or reply."""


def json_field(**kwargs: Any) -> Any:
    """A dict field that travels as one JSON string."""
    return field(metadata={_JSON: True}, **kwargs)


def flat_field(
    cls: type, prefix: str = "", cast: Callable[[Any], Any] | None = None, optional: bool = False
) -> Any:
    """A dataclass field that travels as one entry per field of ``cls``, named ``prefix`` +
    field name, each passed through ``cast`` (both ways) when given. An ``optional`` one
    defaults to ``None``, which does not travel."""
    extra = {"default": None} if optional else {}
    return field(metadata={_FLAT: (cls, prefix, cast)}, kw_only=True, **extra)


def _required(f: Field) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


@dataclass(frozen=True)
class Body:
    """A request or reply; subclasses are frozen dataclasses whose fields are its entries."""

    def to_payload(self) -> Payload:
        """The entries that travel (see the module docstring)."""
        out: Payload = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or (value is False and f.default is False):
                continue
            if _FLAT in f.metadata:
                _, prefix, cast = f.metadata[_FLAT]
                for key, item in asdict(value).items():
                    out[prefix + key] = item if cast is None else cast(item)
            elif f.metadata.get(_JSON):
                out[f.name] = json.dumps(value)
            else:
                out[f.name] = value
        return out

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        """The message in ``payload``; :class:`ProtocolError` names a missing or unknown entry."""
        given = dict(payload)
        values: dict[str, Any] = {}
        for f in fields(cls):
            if _FLAT in f.metadata:
                values[f.name] = _unflatten(cls, f, given)
            elif f.name in given:
                value = given.pop(f.name)
                values[f.name] = json.loads(value) if f.metadata.get(_JSON) else value
            elif _required(f):
                raise ProtocolError(f"{cls.__name__} lacks its entry {f.name!r}; {SAME_VERSION}")
        if given:
            raise ProtocolError(
                f"{cls.__name__} got unknown entries {sorted(given)}; {SAME_VERSION}"
            )
        return cls(**values)


def _unflatten(owner: type, f: Field, given: Payload) -> Any:
    nested, prefix, cast = f.metadata[_FLAT]
    if not _required(f) and not any(prefix + inner.name in given for inner in fields(nested)):
        return f.default
    items = {}
    for inner in fields(nested):
        key = prefix + inner.name
        if key in given:
            value = given.pop(key)
            items[inner.name] = value if cast is None else cast(value)
        elif _required(inner):
            raise ProtocolError(f"{owner.__name__} lacks its entry {key!r}; {SAME_VERSION}")
    return nested(**items)


@dataclass(frozen=True)
class Empty(Body):
    """A request or reply without entries."""


Req = TypeVar("Req", bound=Body)
Rep = TypeVar("Rep", bound=Body)


@dataclass(frozen=True, eq=False)
class Operation(Generic[Req, Rep]):
    """A party operation: its Flower message type, request and reply classes, and the reply
    entries whose bytes count under another traffic phase than the exchange's own."""

    name: str  # "<train|query>.<action>"
    request: type[Req]
    reply: type[Rep]
    reply_phases: tuple[tuple[str, str], ...] = ()

    @property
    def category(self) -> str:
        """Flower's message category: ``train``, ``evaluate`` or ``query``."""
        return self.name.split(".", 1)[0]

    @property
    def action(self) -> str:
        """The ClientApp action that serves it."""
        return self.name.split(".", 1)[1]

    def __str__(self) -> str:
        return self.name
