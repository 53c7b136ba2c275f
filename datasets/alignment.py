"""Sample alignment by ECDH private set intersection (the maths; the protocol is in the server
and party modules).

The elliptic-curve work is openmined-psi's (``private_set_intersection``: P-256, hashing to the
curve, per-side secret keys); this module composes its two primitives, ``CreateRequest``
(hash each ID to the curve and raise it to the holder's key) and ``ProcessRequest`` (raise
given points to the holder's key), into the protocol of docs/deployment.md:

1. The server blinds its labels file's IDs with its key s: ``H(l)^s``, in its file's order.
2. Party m raises those points to its key k_m (``H(l)^(s k_m)``, same order) and blinds its
   own IDs: ``H(p)^k_m``, sent sorted by value, so that their order says nothing about its rows.
3. The server raises the party's points to s (``H(p)^(k_m s)``) and compares: equal points are
   equal IDs. It keeps the labels rows that every party holds, in its file's order, and tells
   each party only the positions, in the party's sorted list, of its kept rows.

Points travel as (n, 33) uint8 arrays (compressed P-256 points).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

with warnings.catch_warnings():  # its generated protobuf code predates the runtime's major
    warnings.simplefilter("ignore", UserWarning)
    import private_set_intersection.python as psi

from vflfs.datasets.errors import DataError
from vflfs.ml.parallel import chunks, fork_map, shared

POINT_BYTES = 33  # a compressed P-256 point
METHOD = "ECDH-PSI (openmined-psi, P-256)"


class AlignmentError(DataError):
    """The IDs cannot be aligned; ``party`` is the party at fault (None: the server's file)."""

    def __init__(self, message: str, party: int | None = None) -> None:
        super().__init__(message)
        self.party = party


def to_points(elements: Sequence[bytes]) -> np.ndarray:
    """openmined-psi's encrypted elements as an (n, 33) uint8 array."""
    if len(elements) == 0:
        return np.zeros((0, POINT_BYTES), np.uint8)
    return np.frombuffer(b"".join(elements), np.uint8).reshape(-1, POINT_BYTES)


def _elements(points: np.ndarray) -> list[bytes]:
    return [row.tobytes() for row in np.ascontiguousarray(points, np.uint8)]


def _ids(ids: Sequence[str] | np.ndarray) -> list[str]:
    return [str(v) for v in np.asarray(ids).tolist()]


def check_points(points: np.ndarray, n: int | None, who: str, party: int | None) -> np.ndarray:
    """``points`` if it is an (n, 33) uint8 array, else an AlignmentError naming ``who``."""
    points = np.asarray(points)
    shape_ok = points.ndim == 2 and points.shape[1] == POINT_BYTES
    if not shape_ok or points.dtype != np.uint8 or (n is not None and len(points) != n):
        expected = f"({'n' if n is None else n}, {POINT_BYTES}) uint8"
        raise AlignmentError(
            f"{who} sent points of shape {points.shape} and dtype {points.dtype}; expected "
            f"{expected}; fix: run the same vflfs version on every machine",
            party,
        )
    return points


def raise_to_key(key: bytes, points: np.ndarray, workers: int = 1) -> np.ndarray:
    """Each point raised to ``key`` (openmined-psi's ``ProcessRequest``), same order; on
    ``workers`` forked processes."""
    return _in_chunks(_raise_chunk, np.asarray(points, np.uint8), key, workers)


def blind(key: bytes, ids: Sequence[str] | np.ndarray, workers: int = 1) -> np.ndarray:
    """``H(id)^key`` of each ID's text (openmined-psi's ``CreateRequest``), same order; on
    ``workers`` forked processes."""
    return _in_chunks(_blind_chunk, _ids(ids), key, workers)


def _in_chunks(fn, items, key: bytes, workers: int) -> np.ndarray:
    parts = [(int(c[0]), int(c[-1]) + 1) for c in chunks(len(items), workers)]
    results = fork_map(fn, parts, workers, key=key, items=items)
    return np.concatenate(results) if results else np.zeros((0, POINT_BYTES), np.uint8)


def _raise_chunk(part: tuple[int, int]) -> np.ndarray:
    inputs = shared()
    server = psi.server.CreateFromKey(inputs["key"], True)
    request = psi.Request()
    request.reveal_intersection = True
    request.encrypted_elements.extend(_elements(inputs["items"][part[0] : part[1]]))
    return to_points(server.ProcessRequest(request).encrypted_elements)


def _blind_chunk(part: tuple[int, int]) -> np.ndarray:
    inputs = shared()
    client = psi.client.CreateFromKey(inputs["key"], True)
    return to_points(client.CreateRequest(inputs["items"][part[0] : part[1]]).encrypted_elements)


def new_key() -> bytes:
    """A fresh secret key (32 bytes) from openmined-psi's key generation."""
    return bytes(psi.client.CreateWithNewKey(True).GetPrivateKeyBytes())


@dataclass(frozen=True)
class PartyBlinding:
    """What party m sends: the server's points raised to its key (server order) and its own
    blinded IDs sorted by value; ``order[j]`` is the party's row behind ``own[j]``."""

    labels: np.ndarray
    own: np.ndarray
    order: np.ndarray


def party_blinding(
    key: bytes, server_points: np.ndarray, ids: np.ndarray, workers: int = 1
) -> PartyBlinding:
    """Party m's step 2 with its secret ``key``."""
    labels = raise_to_key(key, server_points, workers)
    own = blind(key, ids, workers)
    order = np.argsort(own.view(f"S{POINT_BYTES}").reshape(-1), kind="stable")
    return PartyBlinding(labels=labels, own=own[order], order=order.astype(np.int64))


def intersect(
    labels: Sequence[np.ndarray], parties: Sequence[np.ndarray]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The server's step 3 after raising each party's points to its key.

    ``labels[m]`` holds ``H(l)^(s k_m)`` for the labels file's rows (its order) and
    ``parties[m]`` ``H(p)^(k_m s)`` for party m's sorted list. Returns ``keep`` (the labels rows
    that every party holds, in the labels file's order) and, per party, the position in its
    sorted list of each kept sample (same order).
    """
    hits = []
    for m, (mine, theirs) in enumerate(zip(labels, parties, strict=True)):
        index = {row.tobytes(): j for j, row in enumerate(theirs)}
        if len(index) != len(theirs):
            raise AlignmentError(
                f"party {m} has {len(theirs) - len(index)} duplicate sample ID(s); fix: give "
                "each row a distinct ID",
                m,
            )
        hits.append(np.asarray([index.get(row.tobytes(), -1) for row in mine], np.int64))
    held = np.ones(len(labels[0]) if labels else 0, bool)
    for found in hits:
        held &= found >= 0
    keep = np.flatnonzero(held).astype(np.int64)
    return keep, [found[keep] for found in hits]


def overlap_report(n_labels: int, sizes: Sequence[int], kept: int) -> str:
    """A one-line summary (counts only) for logs and errors."""
    parties = ", ".join(f"party {m}: {n}" for m, n in enumerate(sizes))
    return f"{kept} samples in common (labels file: {n_labels}; {parties})"
