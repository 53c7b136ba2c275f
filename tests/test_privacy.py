"""Privacy audit: record every message of a real run and inspect its content.

No party-to-server message may carry raw (or scaled) feature values, and no server-to-party
message may carry labels. FRIEDMAN has continuous features and targets, so any copy of them
in a message would show up as exact value matches.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord

from vflfs.client_app.data import party_data
from vflfs.datasets import load_dataset
from vflfs.federation import DOWN, UP, decode, encode
from vflfs.federation.payload import from_array
from vflfs.protocol import (
    OPERATIONS,
    SETUP,
    STEP,
    Empty,
    SetupRequest,
    StepReply,
    StepRequest,
)
from vflfs.runtime.config import compose_config
from vflfs.server_app.experiment import Experiment

from helpers import run_local, tiny_config

FRIEDMAN = (
    "dataset=friedman dataset.params.n_samples=400 dataset.params.n_features=24 "
    "split.num_parties=3 training.epochs=3 training.batch_size=64"
)


class Recorder:
    """An observer that keeps every message: (direction, party, operation, content)."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, int, str, object]] = []

    def __call__(self, direction, party, operation, content) -> None:
        self.messages.append((direction, party, operation, content))


def numbers_in(content) -> np.ndarray:
    """Every number a message carries: array values, config scalars, numbers inside JSON."""
    found: list[np.ndarray] = []
    for record in content.values():
        if isinstance(record, ArrayRecord):
            found += [from_array(a).astype(np.float64).ravel() for a in record.values()]
        elif isinstance(record, ConfigRecord):
            for value in record.values():
                found.append(np.asarray(_numbers(value), dtype=np.float64))
    return np.concatenate(found) if found else np.zeros(0)


def _numbers(value) -> list[float]:
    if isinstance(value, str):
        try:
            return _numbers(json.loads(value))
        except ValueError:
            return []
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list | tuple):
        return [x for v in value for x in _numbers(v)]
    return []


def share_matching(values: np.ndarray, secret: np.ndarray) -> float:
    """Share of the (non-integer) message values that equal some secret value."""
    values = values[values != np.round(values)]  # indices and counts are not data
    if values.size == 0:
        return 0.0
    secret32 = np.unique(secret.astype(np.float32))
    return float(np.isin(values.astype(np.float32), secret32).mean())


def audit(messages, features: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    up = [numbers_in(c) for d, _, _, c in messages if d == UP]
    down = [numbers_in(c) for d, _, _, c in messages if d == DOWN]
    return {
        "features_up": max(share_matching(v, features) for v in up),
        "labels_down": max(share_matching(v, labels) for v in down),
    }


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    cfg = compose_config(FRIEDMAN)
    recorder = Recorder()
    run_local(cfg, tmp_path_factory.mktemp("audit"), observers=[recorder])
    return cfg, recorder


def secrets(cfg):
    exp = Experiment.from_config(cfg)
    raw = load_dataset("friedman", None, **dict(cfg.dataset.params)).X
    scaled = [party_data(exp.party_spec(m)["data"], exp.splits.train).X for m in range(3)]
    features = np.concatenate([raw.ravel(), *[s.ravel() for s in scaled]])
    return features, exp.y


def test_every_message_of_a_run_is_clean(recorded_run):
    cfg, recorder = recorded_run
    ops = {(d, op) for d, _, op, _ in recorder.messages}
    assert {(UP, STEP.name), (DOWN, STEP.name), (UP, SETUP.name)} <= ops
    assert len(recorder.messages) > 60
    features, labels = secrets(cfg)
    shares = audit(recorder.messages, features, labels)
    assert shares["features_up"] < 0.01, shares  # chance float32 coincidences only
    assert shares["labels_down"] < 0.01, shares


def test_the_audit_catches_a_leak(recorded_run):
    """The same audit flags a party that sends its rows, or a server that sends labels."""
    cfg, recorder = recorded_run
    features, labels = secrets(cfg)
    exp = Experiment.from_config(cfg)
    view = party_data(exp.party_spec(0)["data"], exp.splits.train).X
    leaky = [
        *recorder.messages,
        (UP, 0, STEP.name, encode(StepReply(embeddings=[view[:64]]).to_payload())),
        (
            DOWN,
            0,
            STEP.name,
            encode(StepRequest(grads=[labels[:64].astype(np.float32)]).to_payload()),
        ),
    ]
    shares = audit(leaky, features, labels)
    assert shares["features_up"] > 0.9
    assert shares["labels_down"] > 0.9


def test_classification_labels_never_travel(tmp_path):
    """Down-messages carry only row indices, gradients and instructions; never y. Each one
    decodes as its operation's request, which rejects any entry it does not declare."""
    recorder = Recorder()
    cfg = tiny_config("training.epochs=2")
    run_local(cfg, tmp_path, observers=[recorder])
    y = Experiment.from_config(cfg).y
    request_of = {op.name: op.request for op in OPERATIONS}
    sent = [
        request_of[op].from_payload(decode(c)) for d, _, op, c in recorder.messages if d == DOWN
    ]
    assert {type(r) for r in sent} == {Empty, SetupRequest, StepRequest}
    train = np.zeros(0, np.int64)
    for request in sent:
        rows: list[np.ndarray] = []
        if isinstance(request, SetupRequest):
            rows, train = [request.train_rows, request.eval_rows], request.train_rows
            spec = json.dumps(request.spec)
            assert "label" not in spec and '"y"' not in spec
        elif isinstance(request, StepRequest):
            # the next batches travel as a plan over the training rows; expanded, as the party
            # expands them, they are row indices
            assert request.plan is not None or not request.batches
            rows = request.batch_rows(train)
            assert all(g.dtype == np.float32 and g.ndim == 2 for g in request.grads)
        for values in rows:  # row indices: never the label vector of those rows
            assert values.dtype == np.int64
            assert not np.array_equal(values, y[values])
