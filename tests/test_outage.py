"""Short outages: a request Flower reports lost is sent again, and a party applies a repeated
request once; a party gone too long, or back without its state, ends the run with a checkpoint
that resume=true continues.

The faults are Flower's own: the grids below are the real in-process grid (the real ClientApp,
messages through protobuf) except that one ``train.step`` to party 1 gets the error reply the
SuperLink makes for a node that missed its heartbeats (``Node Unavailable``), built with
Flower's own function. A real SuperNode paused past its heartbeats is exercised on loopback
(``test_deployment.py``, ``-m extended``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.common.constant import ErrorCode
from flwr.common.serde import recorddict_to_proto
from flwr.server.superlink.linkstate.utils import create_message_error_unavailable_res_message

from vflfs.client_app import replay
from vflfs.client_app.app import app as client_app
from vflfs.client_app.store import RUN_KEY
from vflfs.federation import LocalGrid, PartyError, message_bytes
from vflfs.federation.payload import decode_error, encode, from_array
from vflfs.protocol import STEP, Delivery
from vflfs.runtime.cli import run_job
from vflfs.runtime.results import CHECKPOINT, ERROR, PARTY_STATE
from vflfs.server_app.run import run_experiment

from helpers import tiny_config

# checkpoint_every_s=0: a checkpoint at every epoch boundary, for the run that stops
RUN = (
    "strategy=vfl split.num_parties=2 training.epochs=3 training.patience=null checkpoint_every_s=0"
)
LOSE = 10  # the 10th training step to party 1: in epoch 1 (the tiny run has 7 per epoch)


class LossyGrid(LocalGrid):
    """The in-process grid, except that one ``train.step`` to party 1 is lost: Flower's
    ``Node Unavailable`` reply comes back instead of the party's. With ``applied`` the party
    got the request and applied it (its reply was lost); with ``gone`` its node then stays
    away; with ``restarted`` it comes back without its state (a new SuperNode process), with
    ``moved`` as a new node too (a new SuperNode without SuperNode authentication)."""

    def __init__(
        self,
        num_nodes: int,
        applied: bool,
        gone: bool = False,
        restarted: bool = False,
        moved: bool = False,
        **kw,
    ) -> None:
        super().__init__(client_app, num_nodes, **kw)
        self.applied, self.gone, self.restarted, self.moved = applied, gone, restarted, moved
        self.victim = next(n for n, (pid, _) in self.contexts.items() if pid == 1)
        self.steps = 0
        self.lost: Message | None = None
        self.resent: list[Message] = []

    def get_node_ids(self):
        return [n for n in self._state if not (self.gone and self.lost and n == self.victim)]

    def push_messages(self, messages):
        ids = []
        for message in messages:
            to_victim = message.metadata.dst_node_id == self.victim
            if to_victim and message.metadata.message_type == STEP.name:
                self.steps += 1
                if self.lost is not None and self.lost.metadata.group_id == (
                    message.metadata.group_id
                ):
                    self.resent.append(message)
                elif self.steps == LOSE:
                    ids.append(self._lose(message))
                    continue
            ids += super().push_messages([message])
        return ids

    def _lose(self, message: Message) -> str:
        if self.applied:
            (mid,) = super().push_messages([message])
            del self._replies[mid]  # the party's reply never arrives
        else:
            mid = message.metadata.__dict__["_message_id"] = f"lost-{self.steps}"
        self.lost = message
        if self.restarted or self.moved:
            old = self._state.pop(self.victim)
            node = old.node_id + 1 if self.moved else old.node_id
            self._state[node] = Context(
                old.run_id, node, dict(old.node_config), RecordDict(), dict(old.run_config)
            )
        self._replies[mid] = create_message_error_unavailable_res_message(
            message.metadata, "node_unavail"
        )
        assert self._replies[mid].error.code == ErrorCode.NODE_UNAVAILABLE
        return mid


def run(grid: LocalGrid, out, extra: str = "") -> dict:
    return run_experiment(grid, tiny_config(f"{RUN} {extra}"), out)


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory) -> dict:
    return run(LocalGrid(client_app, 2), tmp_path_factory.mktemp("undisturbed"))


@pytest.mark.parametrize("applied", [False, True], ids=["request-lost", "reply-lost"])
def test_a_lost_step_is_sent_again_and_the_run_is_the_undisturbed_one(
    undisturbed, tmp_path, applied
):
    grid = LossyGrid(2, applied=applied)
    summary = run(grid, tmp_path)
    assert grid.lost is not None and len(grid.resent) == 1
    again = grid.resent[0]
    assert Delivery.parse(again.metadata.group_id) == Delivery.parse(grid.lost.metadata.group_id)
    assert message_bytes(again.content) == message_bytes(grid.lost.content)
    # Applied once either way: every later loss is the undisturbed run's.
    assert summary["step_losses"] == undisturbed["step_losses"]
    assert summary["test_metric"] == undisturbed["test_metric"]
    sent = summary["communication"]["phases"]["training"]
    reference = undisturbed["communication"]["phases"]["training"]
    assert sent["messages_down"] == reference["messages_down"] + 1  # the re-sent request


class RepeatingGrid(LocalGrid):
    """The in-process grid, except that one ``train.step`` reaches party 1 twice, and then
    the step before it once more (a stale copy); the party's replies and model are kept."""

    def __init__(self) -> None:
        super().__init__(client_app, 2)
        self.victim = next(n for n, (pid, _) in self.contexts.items() if pid == 1)
        self.steps = 0
        self.previous: Message | None = None
        self.replies: dict[str, Message] = {}
        self.models: dict[str, dict[str, np.ndarray]] = {}

    def push_messages(self, messages):
        ids = []
        for message in messages:
            if message.metadata.dst_node_id == self.victim and (
                message.metadata.message_type == STEP.name
            ):
                self.steps += 1
                if self.steps == LOSE:
                    ids.append(self._twice(message))
                    continue
                self.previous = message
            ids += super().push_messages([message])
        return ids

    def _deliver(self, message: Message, name: str) -> str:
        copy = Message(
            message.content,
            dst_node_id=message.metadata.dst_node_id,
            message_type=message.metadata.message_type,
            group_id=message.metadata.group_id,
        )
        (mid,) = super().push_messages([copy])
        self.replies[name] = self._replies[mid]
        state = self._state[self.victim].state
        self.models[name] = {k: np.array(from_array(a)) for k, a in state["vflfs.model"].items()}
        return mid

    def _twice(self, message: Message) -> str:
        mid = self._deliver(message, "first")
        del self._replies[self._deliver(message, "again")]
        del self._replies[self._deliver(self.previous, "stale")]
        return mid


def test_a_party_answers_a_repeated_step_with_its_first_reply_and_applies_it_once(
    undisturbed, tmp_path
):
    grid = RepeatingGrid()
    summary = run(grid, tmp_path)
    first, again, stale = (grid.replies[k] for k in ("first", "again", "stale"))
    assert decode_error(first.content) is None and first.content.get("arrays")
    assert recorddict_to_proto(again.content) == recorddict_to_proto(first.content)
    failure = decode_error(stale.content)
    assert failure is not None and failure.type == "StaleRequest", failure
    assert "was not applied" in failure.message
    for name in ("again", "stale"):  # the model is the one the first delivery left
        for key, weights in grid.models["first"].items():
            np.testing.assert_array_equal(grid.models[name][key], weights)
    assert summary["step_losses"] == undisturbed["step_losses"]


def test_a_kept_reply_is_the_last_one_whole():
    """The replay keeps the last reply's records, none of an earlier reply's; a reply kept by
    an older vflfs (as bytes) is refused with the fix, never answered empty."""
    context = Context(run_id=1, node_id=2, node_config={}, state=RecordDict(), run_config={})
    first = encode({"embeddings": [np.ones((2, 3), np.float32)], "loss": 0.5})
    second = encode({"loss": 0.25})  # no arrays
    replay.keep(context, Delivery("s", 1), STEP.name, first)
    assert recorddict_to_proto(replay.kept_reply(context, Delivery("s", 1), STEP.name)) == (
        recorddict_to_proto(first)
    )
    replay.keep(context, Delivery("s", 2), STEP.name, second)
    again = replay.kept_reply(context, Delivery("s", 2), STEP.name)
    assert recorddict_to_proto(again) == recorddict_to_proto(second) and "arrays" not in again
    assert replay.kept_reply(context, Delivery("s", 3), STEP.name) is None  # a new request
    context.state[replay.RECORD] = ConfigRecord(
        {"session": "s", "step": 2, "operation": STEP.name, "reply": b"\x00"}
    )
    with pytest.raises(ValueError, match=r"older vflfs; fix: start the run afresh \(rerun=true\)"):
        replay.kept_reply(context, Delivery("s", 2), STEP.name)


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ("gone", "it was unreachable for more than 1 s (federation.outage_timeout"),
        ("restarted", "a SuperNode that restarted during the run has lost its party's state"),
        ("moved", "its SuperNode came back as a new node"),
    ],
)
def test_a_party_gone_too_long_or_back_without_its_state_ends_the_run_which_resumes(
    undisturbed, tmp_path, fault, says
):
    extra = "federation.outage_timeout=1"
    parties = {RUN_KEY: str(tmp_path / PARTY_STATE)}
    grid = LossyGrid(2, applied=False, run_config=parties, **{fault: True})
    with pytest.raises(PartyError, match=r"party 1 failed in 'train.step'"):
        run(grid, tmp_path, extra)
    error = (tmp_path / ERROR).read_text()
    assert says in error and "the same run with resume=true continues it" in error, error
    assert (tmp_path / CHECKPOINT).exists()
    resumed = run_job(tiny_config(f"{RUN} {extra} resume=true"), tmp_path)
    assert resumed["step_losses"] == undisturbed["step_losses"]
    assert resumed["test_metric"] == undisturbed["test_metric"]


class SilentGrid(LocalGrid):
    """The in-process grid, except that partition 1's node never answers its first message
    (``query.info``): a ClientApp that waits for ever, as a SuperNode can start for a message
    of a run stopped with ``flwr stop``."""

    def __init__(self, num_nodes: int, **kw) -> None:
        super().__init__(client_app, num_nodes, **kw)
        self.victim = next(n for n, (pid, _) in self.contexts.items() if pid == 1)

    def push_messages(self, messages):
        ids = []
        for message in messages:
            (mid,) = super().push_messages([message])
            if message.metadata.dst_node_id == self.victim:
                del self._replies[mid]  # its reply never comes
            ids.append(mid)
        return ids


def test_a_node_that_never_answers_its_first_message_is_named_with_the_fix(tmp_path):
    """Before the parties' replies say which partition a node holds, the silent one is named
    by its node id (not by a party index it has not reported), with what to do."""
    grid = SilentGrid(2)
    with pytest.raises(PartyError) as caught:
        run(grid, tmp_path, "federation.timeout=0.5")
    message = str(caught.value)
    assert f"node {grid.victim} connected but did not answer 'query.info'" in message
    assert not re.search(r"party \d", message)  # no partition is known for it yet
    assert caught.value.party is None and "restart that SuperNode" in message
    assert "restart that SuperNode" in (tmp_path / ERROR).read_text()
