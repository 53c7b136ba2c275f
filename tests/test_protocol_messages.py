"""The typed protocol (vflfs.protocol): payloads of its messages, checks on what arrives, and
that both sides speak only through it."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from vflfs.client_app.app import app as client_app
from vflfs.client_app.registry import OPERATIONS as REGISTERED
from vflfs.client_app.registry import load_operations
from vflfs.federation import Federation, LocalGrid, PartyError, decode, encode
from vflfs.ml.embedding_selection import ProxSGD
from vflfs.ml.gini import GiniParams
from vflfs.protocol import (
    INFO,
    OPERATIONS,
    STEP,
    GiniMaskRequest,
    LocalSelectRequest,
    Operation,
    ProtocolError,
    SetupRequest,
    StepReply,
    StepRequest,
)

from helpers import ROOT


def through_records(message):
    """The message as the other side reads it (encoded as Flower records and back)."""
    return type(message).from_payload(decode(encode(message.to_payload())))


def test_a_step_request_round_trips_and_sends_no_defaults():
    request = StepRequest(grads=[np.ones((2, 3), np.float32)], batches=[np.arange(4)])
    assert set(request.to_payload()) == {"grads", "batches"}  # evaluate=False does not travel
    back = through_records(request)
    np.testing.assert_array_equal(back.grads[0], request.grads[0])
    np.testing.assert_array_equal(back.batches[0], np.arange(4))
    assert back.evaluate is False
    assert through_records(StepRequest(evaluate=True)).evaluate is True
    assert set(StepReply(embeddings=[np.zeros((2, 4))]).to_payload()) == {"embeddings"}


def test_nested_and_json_fields_travel_flat():
    params = GiniParams(10, 2, 100, 52, 40, 512)
    mask = GiniMaskRequest(b"key", np.zeros((1, 1, 1), np.uint8), np.arange(3), params=params)
    payload = mask.to_payload()
    assert payload["gini_bins"] == 10 and payload["gini_djn"] == 1  # one int entry per field
    assert through_records(mask).params == params
    prox = ProxSGD(0.1, 0.01, 0.02, 3, 32, 7)
    select = LocalSelectRequest(components=np.arange(2), prox=prox)
    assert {"lam", "lr", "prox_lr", "epochs", "batch_size", "seed"} <= set(select.to_payload())
    assert through_records(select).prox == prox
    setup = SetupRequest({"index": 1, "model": {"hidden": [8]}}, "n", np.arange(2), np.arange(1))
    assert isinstance(setup.to_payload()["spec"], str)
    assert through_records(setup).spec == {"index": 1, "model": {"hidden": [8]}}


def test_unknown_and_missing_entries_are_named():
    with pytest.raises(ProtocolError, match=r"unknown entries \['bogus'\].*same vflfs version"):
        StepRequest.from_payload({"bogus": 1})
    with pytest.raises(ProtocolError, match=r"SetupRequest lacks its entry 'nonce'"):
        SetupRequest.from_payload({"spec": "{}", "train_rows": [], "eval_rows": []})
    with pytest.raises(ProtocolError, match=r"lacks its entry 'gini_bins'"):
        GiniMaskRequest.from_payload({"public_key": b"", "labels": [], "rows": []})


@dataclasses.dataclass(frozen=True)
class StepWithExtra(StepRequest):
    """A step request with an entry the party does not know (another vflfs version)."""

    extra: int = 1


def test_a_party_rejects_a_request_it_does_not_know_and_names_the_entry():
    federation = Federation(LocalGrid(client_app, 1), 1)
    federation.connect()
    odd = Operation(STEP.name, StepWithExtra, StepReply)
    with pytest.raises(PartyError, match=r"party 0 failed in 'train.step'.*unknown entries"):
        federation.send(odd, {0: StepWithExtra()})


def test_the_parties_serve_exactly_the_protocols_operations():
    load_operations()
    assert {op.message_type for op in REGISTERED} == {op.name for op in OPERATIONS}
    assert all(REGISTERED[op.name].operation is op for op in OPERATIONS)
    assert INFO in OPERATIONS


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_no_operation_name_is_spelled_outside_the_protocol():
    """The server and the parties name an operation through vflfs.protocol only."""
    names = {op.name for op in OPERATIONS}
    spelled = [
        f"{path.relative_to(ROOT)}:{line}: {value!r}"
        for folder in ("client_app", "strategies", "server_app", "federation", "runtime")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, value in _string_constants(path)
        if any(name in value for name in names)
    ]
    assert spelled == []
