"""The party's side of the identity handshake (:mod:`vflfs.federation.identity`).

Sent before alignment when the server lists the parties' public keys (``federation.party_keys``).
The party answers with its partition id, a keyed digest of its own file and, when its node
config names an ``identity-key``, its Ed25519 signature of the run id (its own context's, not
the server's word), its partition id, the server's nonce and that digest.

The digest is a BLAKE2b of the file's IDs and feature values in ID order, keyed with the run's
fresh ``digest_key``: two partitions that hold the same file give the same digest, and the
server learns nothing else from it (without the whole file it cannot compute one).
"""

from __future__ import annotations

import hashlib

import numpy as np

from vflfs.datasets.errors import DataError
from vflfs.datasets.party_files import load_party_file
from vflfs.federation.identity import NODE_KEY, KeyFileError, load_private_key, signed_message
from vflfs.protocol import IDENTIFY, IdentifyReply, IdentifyRequest

from .ops_align import _node, _source
from .registry import OPERATIONS
from .session import Session

_ROWS_PER_CHUNK = 1 << 15


@OPERATIONS.operation(IDENTIFY)
def identify(session: Session, request: IdentifyRequest) -> IdentifyReply:
    """Prove who this party is; nothing of its data leaves it but the keyed digest."""
    digest = data_digest(session, request)
    key_path = _node(session, NODE_KEY)
    signature = b""
    if key_path:
        try:
            key = load_private_key(key_path)
        except KeyFileError as error:
            raise DataError(
                f"party {session.partition_id}: {error} ({key_path})",
                public=f"party {session.partition_id}: {error} (node config {NODE_KEY})",
            ) from error
        message = signed_message(
            session.context.run_id, session.partition_id, bytes(request.nonce), digest
        )
        signature = key.sign(message)
    return IdentifyReply(partition_id=session.partition_id, digest=digest, signature=signature)


def data_digest(session: Session, request: IdentifyRequest) -> bytes:
    """The keyed digest of this party's own file; empty when it has none (its columns then
    come from the server's dataset)."""
    if not (_node(session, "data-path") or request.path):
        return b""
    source = _source(session, request)
    table = load_party_file(source["path"], source["id_column"], source["cache_dir"] or None)
    return table_digest(table.ids, table.X, bytes(request.digest_key))


def table_digest(ids: np.ndarray, X: np.ndarray, key: bytes) -> bytes:
    """BLAKE2b keyed with ``key`` over the IDs and the rows of ``X``, both in ID order (so a
    reordered copy of a file gives the same digest)."""
    order = np.argsort(np.asarray(ids), kind="stable")
    h = hashlib.blake2b(key=key, digest_size=32)
    h.update(f"{len(order)} {X.shape[1]}\n".encode())
    h.update("\x1f".join(str(i) for i in np.asarray(ids)[order]).encode())
    for start in range(0, len(order), _ROWS_PER_CHUNK):
        rows = order[start : start + _ROWS_PER_CHUNK]
        h.update(np.ascontiguousarray(X[rows], dtype=np.float32).tobytes())
    return h.digest()
