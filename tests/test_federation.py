"""Payload codec and byte accounting."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import Message
from flwr.supercore.task_identity import TaskIdentity

from vflfs.federation import DOWN, UP, Traffic, decode, encode, message_bytes
from vflfs.runtime.config import compose_config

from helpers import run_local


def test_payload_round_trip():
    payload = {
        "rows": np.arange(10, dtype=np.int64),
        "grads": [np.ones((3, 4), np.float32), np.zeros((2, 4), np.float32)],
        "spec": '{"a": 1}',
        "lr": 0.5,
        "empty": [],
    }
    back = decode(encode(payload))
    np.testing.assert_array_equal(back["rows"], payload["rows"])
    assert [g.shape for g in back["grads"]] == [(3, 4), (2, 4)]
    assert back["grads"][0].dtype == np.float32
    assert back["spec"] == '{"a": 1}' and back["lr"] == 0.5 and back["empty"] == []


def test_reserved_separator_is_rejected():
    with pytest.raises(ValueError, match="must not contain"):
        encode({"a#b": 1})


@pytest.mark.parametrize("n", [16, 1024, 100_000])
def test_message_bytes_count_the_array_payload(n):
    """An n-float32 array costs 4n bytes plus a small constant framing overhead."""
    empty = message_bytes(encode({"x": np.zeros(0, np.float32)}))
    full = message_bytes(encode({"x": np.zeros(n, np.float32)}))
    assert 4 * n <= full - empty <= 4 * n + 16


def test_traffic_by_phase_and_direction():
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    traffic = Traffic()
    small = Message(encode({"x": np.zeros(10, np.float32)}), dst_node_id=1, message_type="query.a")
    big = Message(encode({"x": np.zeros(1000, np.float32)}), dst_node_id=1, message_type="query.a")
    with traffic.in_phase("training"):
        traffic.record(small, DOWN)
        traffic.record(big, UP)
        traffic.record(big, UP)
    with traffic.in_phase("evaluation"):
        traffic.record(small, UP)
    s = traffic.summary()
    assert s["phases"]["training"]["bytes_up"] == 2 * message_bytes(big.content)
    assert s["phases"]["training"]["bytes_down"] == message_bytes(small.content)
    assert s["phases"]["training"]["messages_up"] == 2
    assert s["phases"]["evaluation"]["bytes_down"] == 0
    assert s["bytes_up"] == 2 * message_bytes(big.content) + message_bytes(small.content)
    assert s["mb"] == pytest.approx(traffic.total_bytes() / 2**20)
    assert traffic.phase == "setup"


def test_named_entries_are_filed_under_their_own_phase():
    from flwr.common.serde import array_record_to_proto

    from vflfs.federation.traffic import entry_bytes

    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    content = encode(
        {"embeddings": [np.zeros((64, 16), np.float32)], "eval_embeddings": np.zeros((500, 16))}
    )
    traffic = Traffic()
    with traffic.in_phase("training"):
        traffic.record(
            Message(content, dst_node_id=1, message_type="train.step"),
            UP,
            {"eval_embeddings": "evaluation"},
        )
    moved = traffic.total_bytes("evaluation")
    assert 500 * 16 * 8 <= moved <= 500 * 16 * 8 + 64
    record = array_record_to_proto(content["arrays"]).ByteSize()  # the entries, encoded
    assert record == moved + entry_bytes(content, "embeddings")  # each byte counted once
    assert traffic.total_bytes("training") + moved == message_bytes(content)
    assert 64 * 16 * 4 <= traffic.total_bytes("training") <= 64 * 16 * 4 + 128


def test_training_bytes_stay_within_3_percent_of_the_float32_payload(tmp_path):
    """At MADELON size (2 parties, batch 128, 16 components, K = 1) the training messages carry
    the embeddings up and the gradients down, and little else: each batch travels as its plan
    (a few integers), not as 128 int64 row indices (which were 6 points of the payload)."""
    cfg = compose_config(
        "dataset=synthetic_madelon split=even split.num_parties=2 model=mlp "
        "training.batch_size=128 training.epochs=1 training.local_steps=1 training.patience=null "
        "device=cpu"
    )
    summary = run_local(cfg, tmp_path)
    training = summary["communication"]["phases"]["training"]
    payload = len(summary["step_losses"]) * 2 * 2 * 128 * 16 * 4  # up and down, per party
    assert payload < training["bytes_up"] + training["bytes_down"] <= 1.03 * payload


def test_local_grid_hands_each_side_its_own_copy():
    """A handler that changes the message it got changes nothing at the sender (the local
    grid copies requests and replies as Flower's simulation engine does), and the reply
    answers the request it was pushed for."""
    from flwr.app import ConfigRecord, Message, RecordDict
    from flwr.clientapp import ClientApp

    from vflfs.federation import LocalGrid

    app = ClientApp()

    @app.query()
    def answer(msg, context):
        msg.content["config"]["seen"] = True
        return Message(
            RecordDict({"config": ConfigRecord({"got": msg.content["config"]["a"]})}), reply_to=msg
        )

    grid = LocalGrid(app, 2)
    sent = [
        Message(
            RecordDict({"config": ConfigRecord({"a": i})}), dst_node_id=node, message_type="query"
        )
        for i, node in enumerate(grid.get_node_ids())
    ]
    replies = grid.pull_messages(grid.push_messages(sent))
    assert [r.content["config"]["got"] for r in replies] == [0, 1]
    assert [r.metadata.reply_to_message_id for r in replies] == [
        m.metadata.message_id for m in sent
    ]
    assert all("seen" not in m.content["config"] for m in sent)
