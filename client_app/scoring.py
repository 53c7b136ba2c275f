"""What the party side of the secure scoring phases shares (Gini, F-statistic).

Each phase's first message brings the server's public key and the encrypted labels of the
training rows; the party keeps what the next message needs in ``context.state`` (the public
key and its own secrets, which never leave it; through its :class:`~.party_store.PartyStore`),
and the last message leaves it its own scores.
The protocol steps themselves live in ``ops_gini.py`` and ``ops_fstat.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from flwr.app import ArrayRecord, Context

from vflfs.federation.payload import from_array as record_array
from vflfs.federation.payload import to_array as record
from vflfs.ml import paillier
from vflfs.ml.parallel import resolve_workers
from vflfs.protocol import MaskRequest, ScoresReply, ScoresRequest

from .party_store import PartyStore
from .session import Session

SCORES = "vflfs.scores."  # + kind ("gini", "fstat")


@dataclass(frozen=True)
class MaskInputs:
    """What the first step works on."""

    key: paillier.PublicKey  # the server's
    X: np.ndarray  # the party's full feature set at the training rows
    labels: list  # the server's encrypted one-hot labels [[A]] of those rows
    workers: int  # CPU workers for the Paillier operations


def mask_inputs(session: Session, request: MaskRequest) -> MaskInputs:
    """The first step's request, read."""
    return MaskInputs(
        key=paillier.PublicKey.from_bytes(request.public_key),
        X=training_view(session, request.rows),
        labels=paillier.ciphertexts(request.labels),
        workers=resolve_workers(request.workers),
    )


def training_view(session: Session, rows: np.ndarray) -> np.ndarray:
    """The party's full feature set (real and spurious columns) at the given training rows."""
    return np.asarray(session.party.data.X)[np.asarray(rows, dtype=np.int64)]


def keep_pending(
    session: Session, name: str, key: paillier.PublicKey, arrays: dict[str, np.ndarray]
) -> None:
    """Keep the server's public key and ``arrays`` until the next message of the phase."""
    session.store.put(
        name,
        ArrayRecord(
            {
                "public_key": record(np.frombuffer(key.to_bytes(), dtype=np.uint8)),
                **{k: record(a) for k, a in arrays.items()},
            }
        ),
    )


def load_pending(
    session: Session, name: str, missing: str
) -> tuple[paillier.PublicKey, dict[str, np.ndarray]]:
    """What :func:`keep_pending` kept (it stays until the caller drops it); ``missing``: the
    error if nothing was kept."""
    kept = session.store.get(name)
    if kept is None:
        raise ValueError(missing)
    pending = {k: record_array(a) for k, a in kept.items()}
    key = paillier.PublicKey.from_bytes(pending.pop("public_key").tobytes())
    return key, pending


def by_feature(array: np.ndarray) -> list[list]:
    """The ciphertexts of a ``uint8`` array (features, per feature, bytes), per feature."""
    array = np.asarray(array)
    flat = paillier.ciphertexts(array)
    per = array.shape[1]
    return [flat[f * per : (f + 1) * per] for f in range(array.shape[0])]


def keep_scores(session: Session, request: ScoresRequest, kind: str) -> ScoresReply:
    """The last step: keep the server's scores of this party's own features."""
    scores = np.asarray(request.scores, dtype=np.float64)
    session.store.put(SCORES + kind, ArrayRecord({"scores": record(scores)}))
    return ScoresReply(features=int(scores.size))


def stored_scores(context: Context, kind: str = "gini") -> np.ndarray | None:
    """The scores the server returned to this party in the last ``kind`` phase, if any."""
    kept = PartyStore(context).get(SCORES + kind)
    return None if kept is None else np.array(record_array(kept["scores"]))
