"""Party operations of the secure interactive layer (spec section 4; :mod:`vflfs.ml.secure_layer`).

``train.secure_setup`` makes the party's key pair and its share ``eps`` of the interactive
weights; ``train.secure_step`` is ``train.step`` with encrypted embeddings up and masked
embedding gradients down; ``train.secure_forward`` and ``train.secure_backward`` are the
protocol's extra round-trips. The private key, ``eps`` and the pending masks live in
``context.state`` and never leave the party.
"""

from __future__ import annotations

import numpy as np
from flwr.app import ArrayRecord

from vflfs.federation import Payload
from vflfs.federation.payload import from_array as record_array
from vflfs.federation.payload import to_array as record
from vflfs.ml import paillier
from vflfs.ml import secure_layer as sl

from .operations import step
from .registry import OPERATIONS
from .session import Session

STATE = "vflfs.secure"
MODES = {"plaintext": 0, "paillier": 1}


def _load(session: Session) -> dict[str, np.ndarray]:
    if STATE not in session.context.state:
        raise ValueError("secure operation before train.secure_setup")
    return {k: np.array(record_array(a)) for k, a in session.context.state[STATE].items()}


def _save(session: Session, state: dict[str, np.ndarray]) -> None:
    session.context.state[STATE] = ArrayRecord({k: record(v) for k, v in state.items()})


def _ciphers(state: dict[str, np.ndarray]):
    mode = [m for m, v in MODES.items() if v == int(state["mode"][0])][0]
    p = int.from_bytes(state["p"].tobytes(), "big")
    q = int.from_bytes(state["q"].tobytes(), "big")
    workers, randomness = int(state["workers"][0]) or None, sl.RANDOMNESS[int(state["rand"][0])]
    return (
        sl.private_cipher(mode, p, q, workers, randomness),
        sl.public_cipher(mode, state["server_key"], workers, randomness),
    )


@OPERATIONS.operation("train.secure_setup")
def secure_setup(session: Session, payload: Payload) -> Payload:
    """Payload: ``mode``, ``key_bits``, ``server_key`` (bytes), ``width``, ``noise``, ``lr``,
    ``workers`` (0: every CPU), ``randomness`` (``djn`` / ``full``). Reply: the party's public
    key (empty in plaintext mode)."""
    mode = str(payload["mode"])
    randomness = str(payload.get("randomness", "djn"))
    own = sl.make_cipher(mode, int(payload["key_bits"]), randomness=randomness)
    private = getattr(own, "private", None)
    e = len(session.party.components)
    _save(
        session,
        {
            "mode": np.array([MODES[mode]], np.int64),
            "p": paillier.int_bytes(private.p if private else 0),
            "q": paillier.int_bytes(private.q if private else 0),
            "server_key": np.asarray(payload["server_key"], np.uint8),
            "eps": np.zeros((int(payload["width"]), e), np.float64),
            "params": np.array([float(payload["noise"]), float(payload["lr"])]),
            "workers": np.array([int(payload.get("workers", 0))], np.int64),
            "rand": np.array([sl.RANDOMNESS.index(randomness)], np.int64),
        },
    )
    return {"public_key": own.public_bytes()}


@OPERATIONS.operation("train.secure_step")
def secure_step(session: Session, payload: Payload) -> Payload:
    """``train.step`` with masked gradients down (``delta W - r``, the party adds its r) and
    encrypted embeddings up: ``cipher`` (packed along rows) and ``cipher_t`` (along columns)
    per batch; ``eval_cipher`` (along rows) at an epoch boundary."""
    state = _load(session)
    own, _ = _ciphers(state)
    masked = payload.get("grads") or []
    grads = [sl.party_gradient(w, sl.ints_from_wire(state[f"r{i}"])) for i, w in enumerate(masked)]
    reply = step(session, {**payload, "grads": grads})
    if "embeddings" in reply:
        wires = [sl.party_encrypt(own, g) for g in reply.pop("embeddings")]
        reply["cipher"], reply["cipher_t"] = [w[0] for w in wires], [w[1] for w in wires]
    if "eval_embeddings" in reply:
        reply["eval_cipher"] = sl.party_encrypt(own, reply.pop("eval_embeddings"), False)[0]
    return reply


def _embedding(session: Session, which: str, k: int):
    party = session.party
    if which == "eval":
        return party.embed(party.eval_rows)
    return party.forward(party.pending[k], party.pending_seeds[k])


def _cols(eps: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    return eps if mask is None else eps[:, np.asarray(mask, bool)]


@OPERATIONS.operation("train.secure_forward")
def secure_forward(session: Session, payload: Payload) -> Payload:
    """Payload: ``y`` (one ``[[G W~^T + E_s]]`` per pending batch, or one for the evaluation
    rows with ``which = eval``). Reply: ``z`` (``z + E_s`` each)."""
    state = _load(session)
    own, _ = _ciphers(state)
    which = str(payload.get("which", "train"))
    out = []
    for k, wire in enumerate(payload["y"]):
        g, open_ = _embedding(session, which, k)
        out.append(sl.party_forward(own, wire, g, _cols(state["eps"], open_)))
    return {"z": out}


@OPERATIONS.operation("train.secure_backward")
def secure_backward(session: Session, payload: Payload) -> Payload:
    """Payload: ``gradw`` (``[[G^T delta + R]]_m``) and ``delta`` (``[[delta]]_s``) per pending
    batch. Reply: ``gradw`` (``G^T delta + R + N``) and ``de`` (``[[delta eps + r]]_s``); the
    party keeps r and moves ``eps`` by ``-lr N``."""
    state = _load(session)
    own, server = _ciphers(state)
    noise, lr = (float(v) for v in state["params"])
    rng = np.random.default_rng()
    gradw, de = [], []
    for k, (gw, delta) in enumerate(zip(payload["gradw"], payload["delta"], strict=True)):
        g, open_ = _embedding(session, "train", k)
        cols = slice(None) if open_ is None else np.asarray(open_, bool)
        eps = state["eps"][:, cols]
        m, d, r, n = sl.party_backward(own, server, gw, delta, eps, noise, rng, len(g))
        state["eps"][:, cols] -= lr * n
        state[f"r{k}"] = sl.ints_to_wire(r)
        gradw.append(m)
        de.append(d)
    _save(session, state)
    return {"gradw": gradw, "de": de}
