"""Sample alignment by salted hashes of IDs (the maths; the protocol is in the server and party).

The server draws a random salt per run and sends it to the parties over the federation's TLS
connections. Each party returns HMAC-SHA256(salt, id) of each of its IDs; the server computes
the same for the IDs of its labels file, keeps the samples whose hash every party has, in the
order of its labels file, and tells each party only the positions of its own rows in that
order. What each side learns is in docs/deployment.md: parties learn which of their own rows
are in the intersection, nothing about other parties' IDs; the server learns the hashes of
every party's IDs, which it can reverse by brute force when the ID space is small (it knows the
salt). A private set intersection (e.g. ECDH-PSI) would remove that leak and is the goal.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

import numpy as np

from vflfs.datasets.errors import DataError

HASH_BYTES = 32  # SHA-256
SALT_BYTES = 32


class AlignmentError(DataError):
    """The IDs cannot be aligned; ``party`` is the party at fault (None: the server's file)."""

    def __init__(self, message: str, party: int | None = None) -> None:
        super().__init__(message)
        self.party = party


def salted_hashes(salt: bytes, ids: Sequence[str] | np.ndarray) -> np.ndarray:
    """HMAC-SHA256 keyed with ``salt`` of each ID's UTF-8 text: a (n, 32) uint8 array."""
    if len(salt) < 16:
        raise ValueError(f"the salt must have at least 16 bytes, got {len(salt)}")
    out = np.empty((len(ids), HASH_BYTES), dtype=np.uint8)
    for i, value in enumerate(ids):
        digest = hmac.new(salt, str(value).encode("utf-8"), hashlib.sha256).digest()
        out[i] = np.frombuffer(digest, dtype=np.uint8)
    return out


def _index(hashes: np.ndarray, who: str, party: int | None) -> dict[bytes, int]:
    """Hash -> row; raises if the array is malformed or holds a hash twice."""
    hashes = np.asarray(hashes)
    if hashes.ndim != 2 or hashes.shape[1] != HASH_BYTES or hashes.dtype != np.uint8:
        raise AlignmentError(
            f"{who} sent ID hashes of shape {hashes.shape} and dtype {hashes.dtype}; expected "
            f"(n, {HASH_BYTES}) uint8",
            party,
        )
    index = {bytes(row): i for i, row in enumerate(hashes)}
    if len(index) != len(hashes):
        raise AlignmentError(
            f"{who} has {len(hashes) - len(index)} duplicate sample ID(s); fix: give each row "
            "a distinct ID",
            party,
        )
    return index


def intersect(
    server: np.ndarray, parties: Sequence[np.ndarray]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Align the server's rows with every party's.

    Returns ``keep`` (the server's rows whose hash every party holds, in the server's order)
    and, per party, the row of its own file holding each kept sample (same order).
    """
    indexes = [_index(h, f"party {m}", m) for m, h in enumerate(parties)]
    mine = _index(server, "the labels file", None)
    keep = [i for key, i in mine.items() if all(key in index for index in indexes)]
    keep_keys = [bytes(server[i]) for i in keep]
    rows = [np.asarray([index[k] for k in keep_keys], dtype=np.int64) for index in indexes]
    return np.asarray(keep, dtype=np.int64), rows


def overlap_report(n_labels: int, sizes: Sequence[int], kept: int) -> str:
    """A one-line summary (counts only) for logs and errors."""
    parties = ", ".join(f"party {m}: {n}" for m, n in enumerate(sizes))
    return f"{kept} samples in common (labels file: {n_labels}; {parties})"
