"""The identity handshake (:mod:`vflfs.federation.identity`): the server's fresh challenge and
the party's signed answer, before alignment (``federation.party_keys``)."""

from __future__ import annotations

from dataclasses import dataclass

from .body import Body, Operation


@dataclass(frozen=True)
class IdentifyRequest(Body):
    """A fresh nonce for this party, the run's fresh key for the data digest, the ID column's
    default name, and the party's file where its node config names none
    (``dataset.party_paths``)."""

    nonce: bytes
    digest_key: bytes
    id_column: str = "id"
    path: str | None = None


@dataclass(frozen=True)
class IdentifyReply(Body):
    """The partition the party answers for, the keyed digest of its own file (empty without
    one) and its signature (empty when its node config names no ``identity-key``)."""

    partition_id: int
    digest: bytes = b""
    signature: bytes = b""


IDENTIFY = Operation("query.identify", IdentifyRequest, IdentifyReply)
