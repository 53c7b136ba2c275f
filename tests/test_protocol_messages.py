"""The typed protocol (vflfs.protocol): payloads of its messages, checks on what arrives, and
that both sides speak only through it."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vflfs.client_app.app import app as client_app
from vflfs.client_app.registry import HOMES, home, load_operations, registered
from vflfs.client_app.registry import OPERATIONS as REGISTERED
from vflfs.federation import Federation, LocalGrid, PartyError, decode, encode
from vflfs.ml.batches import epoch_batches
from vflfs.ml.embedding_selection import ProxSGD
from vflfs.ml.gini import GiniParams
from vflfs.protocol import (
    ADDED,
    INFO,
    OPERATIONS,
    STEP,
    BatchPlan,
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


def test_a_batch_plan_travels_as_five_integers_and_expands_to_the_servers_batches():
    rows = np.arange(100, 1764, dtype=np.int64)
    plan = BatchPlan(seed=3, epoch=2, size=128, first=4, count=2)
    request = StepRequest(grads=[np.ones((2, 3), np.float32)], plan=plan)
    payload = request.to_payload()
    assert {k: payload[k] for k in payload if k.startswith("plan_")} == {
        "plan_seed": 3, "plan_epoch": 2, "plan_size": 128, "plan_first": 4, "plan_count": 2
    }  # fmt: skip
    back = through_records(request)
    assert back.plan == plan and back.batches == []
    expected = epoch_batches(rows, 128, 3, 2)[4:6]
    got = back.batch_rows(rows)
    assert len(got) == 2 and all(np.array_equal(g, e) for g, e in zip(got, expected, strict=True))
    assert through_records(StepRequest(batches=[np.arange(3)])).plan is None
    with pytest.raises(ValueError, match="different training rows"):
        BatchPlan(3, 2, 128, 12, 2).rows(rows)  # 13 batches: 12 and 13 do not both exist
    with pytest.raises(ValueError, match="not both"):
        StepRequest(batches=[np.arange(3)], plan=plan).batch_rows(rows)


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
    # the ClientApp imports each operation's module on its first message: the table is right
    homes = {op.name: module for module, ops in HOMES.items() for op in ops}
    added = {name: f"ops_{module}" for name, module in ADDED.items()}  # protocol/<module>.py's
    assert sorted(homes | added) == sorted(op.name for op in OPERATIONS)
    assert not set(homes) & set(added)
    for op in OPERATIONS:
        assert REGISTERED[op.name].fn.__module__ == f"vflfs.client_app.{home(op.name)}"
        assert registered(op) is REGISTERED[op.name]


def test_a_fresh_process_finds_the_handler_of_a_copied_operation():
    """A ClientApp shipped to a Ray actor holds copies of the operations; the handler's module
    is still found (by the operation's name) on the first message."""
    code = (
        "import copy, sys; from vflfs.client_app.registry import registered; "
        "from vflfs.protocol import SECURE_STEP; "
        "assert 'vflfs.client_app.ops_secure' not in sys.modules; "
        "print(registered(copy.deepcopy(SECURE_STEP)).fn.__module__)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "vflfs.client_app.ops_secure", result.stderr


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
