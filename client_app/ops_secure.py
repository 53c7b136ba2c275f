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

from vflfs.federation.payload import from_array as record_array
from vflfs.federation.payload import to_array as record
from vflfs.ml import paillier
from vflfs.ml import secure_layer as sl
from vflfs.protocol import (
    SECURE_BACKWARD,
    SECURE_FORWARD,
    SECURE_SETUP,
    SECURE_STEP,
    BackwardReply,
    BackwardRequest,
    ForwardReply,
    ForwardRequest,
    SecureSetupReply,
    SecureSetupRequest,
    SecureStepReply,
    SecureStepRequest,
)
from vflfs.protocol.secure_layer import EVAL

from .operations import advance
from .registry import OPERATIONS
from .session import Session

STATE = "vflfs.secure"
MODES = {"plaintext": 0, "paillier": 1}


def _load(session: Session) -> dict[str, np.ndarray]:
    record = session.store.get(STATE)
    if record is None:
        raise ValueError(f"secure operation before {SECURE_SETUP.name}")
    return {k: np.array(record_array(a)) for k, a in record.items()}


def _save(session: Session, state: dict[str, np.ndarray]) -> None:
    session.store.put(STATE, ArrayRecord({k: record(v) for k, v in state.items()}))


def _ciphers(state: dict[str, np.ndarray]):
    mode = [m for m, v in MODES.items() if v == int(state["mode"][0])][0]
    p = int.from_bytes(state["p"].tobytes(), "big")
    q = int.from_bytes(state["q"].tobytes(), "big")
    workers, randomness = int(state["workers"][0]) or None, sl.RANDOMNESS[int(state["rand"][0])]
    return (
        sl.private_cipher(mode, p, q, workers, randomness),
        sl.public_cipher(mode, state["server_key"], workers, randomness),
    )


@OPERATIONS.operation(SECURE_SETUP)
def secure_setup(session: Session, request: SecureSetupRequest) -> SecureSetupReply:
    """Make the party's key pair and its share ``eps`` (zero) of the interactive weights;
    reply with its public key (empty in plaintext mode)."""
    mode, randomness = str(request.mode), str(request.randomness)
    own = sl.make_cipher(mode, int(request.key_bits), randomness=randomness)
    private = getattr(own, "private", None)
    e = len(session.party.components)
    _save(
        session,
        {
            "mode": np.array([MODES[mode]], np.int64),
            "p": paillier.int_bytes(private.p if private else 0),
            "q": paillier.int_bytes(private.q if private else 0),
            "server_key": np.asarray(request.server_key, np.uint8),
            "eps": np.zeros((int(request.width), e), np.float64),
            "params": np.array([float(request.noise), float(request.lr)]),
            "workers": np.array([int(request.workers)], np.int64),
            "rand": np.array([sl.RANDOMNESS.index(randomness)], np.int64),
        },
    )
    return SecureSetupReply(public_key=own.public_bytes())


@OPERATIONS.operation(SECURE_STEP)
def secure_step(session: Session, request: SecureStepRequest) -> SecureStepReply:
    """The step (:func:`~vflfs.client_app.operations.advance`) with masked gradients down
    (``delta W - r``, the party adds its r) and encrypted embeddings up: ``cipher`` (packed
    along rows) and ``cipher_t`` (along columns) per batch; ``eval_cipher`` (along rows) at an
    epoch boundary."""
    state = _load(session)
    own, _ = _ciphers(state)
    grads = [
        sl.party_gradient(w, sl.ints_from_wire(state[f"r{i}"])) for i, w in enumerate(request.grads)
    ]
    out = advance(session, grads, request.batch_rows(session.party.train_rows), request.evaluate)
    wires = [sl.party_encrypt(own, g) for g in out.embeddings]
    evaluation = out.eval_embeddings
    return SecureStepReply(
        cipher=[w[0] for w in wires] or None,
        cipher_t=[w[1] for w in wires] or None,
        open=out.masks,
        eval_cipher=None if evaluation is None else sl.party_encrypt(own, evaluation, False)[0],
        eval_open=out.eval_open,
        selected=out.selected,
    )


def _embedding(session: Session, which: str, k: int):
    party = session.party
    if which == EVAL:
        return party.embed(party.eval_rows)
    return party.forward(party.pending[k], party.pending_seeds[k])


def _cols(eps: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    return eps if mask is None else eps[:, np.asarray(mask, bool)]


@OPERATIONS.operation(SECURE_FORWARD)
def secure_forward(session: Session, request: ForwardRequest) -> ForwardReply:
    """``z + E_s`` from each ``[[G W~^T + E_s]]`` (per pending batch, or for the evaluation
    rows)."""
    state = _load(session)
    own, _ = _ciphers(state)
    out = []
    for k, wire in enumerate(request.y):
        g, open_ = _embedding(session, str(request.which), k)
        out.append(sl.party_forward(own, wire, g, _cols(state["eps"], open_)))
    return ForwardReply(z=out)


@OPERATIONS.operation(SECURE_BACKWARD)
def secure_backward(session: Session, request: BackwardRequest) -> BackwardReply:
    """Per pending batch, from ``[[G^T delta + R]]_m`` and ``[[delta]]_s``: ``G^T delta + R +
    N`` and ``[[delta eps + r]]_s``; the party keeps r and moves ``eps`` by ``-lr N``."""
    state = _load(session)
    own, server = _ciphers(state)
    noise, lr = (float(v) for v in state["params"])
    rng = np.random.default_rng()
    gradw, de = [], []
    for k, (gw, delta) in enumerate(zip(request.gradw, request.delta, strict=True)):
        g, open_ = _embedding(session, "train", k)
        cols = slice(None) if open_ is None else np.asarray(open_, bool)
        eps = state["eps"][:, cols]
        m, d, r, n = sl.party_backward(own, server, gw, delta, eps, noise, rng, len(g))
        state["eps"][:, cols] -= lr * n
        state[f"r{k}"] = sl.ints_to_wire(r)
        gradw.append(m)
        de.append(d)
    _save(session, state)
    return BackwardReply(gradw=gradw, de=de)
