"""An in-process stand-in for Flower's ``Grid`` that calls the real ClientApp.

Every message (request and reply) is a pickled copy, and each party keeps its own ``Context``,
pickled and unpickled after every message, as Flower's simulation engine moves both between
the driver and its actors: a handler sees only what the message and the context's records hold,
and nothing it changes reaches the sender's objects. (The deployment engine sends both as
protobuf, and the deployment tests run that path; here a protobuf round-trip of the context cost
about a sixth of a MADELON-size run's training time, and of the messages 2.5x their pickling:
~280 us against ~110 us for a training step's request. Every message still meets Flower's
protobuf encoding in the byte accounting, :mod:`.traffic`, which fails on content that cannot
travel.)
``vflfs-run``'s default engine (``engine=local``) and the fast protocol tests run on it;
Flower's engines run the same ServerApp logic and ClientApp. ``run_config`` is what every
party's ``context.run_config`` holds (``vflfs-run`` names the parties' state folder).
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Iterable
from uuid import uuid4

from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity


class LocalGrid(Grid):
    """Synchronous grid over ``num_nodes`` ClientApp instances in this process."""

    def __init__(
        self,
        client_app: ClientApp,
        num_nodes: int,
        run_id: int | None = None,
        run_config: dict | None = None,
    ) -> None:
        self.client_app = client_app
        self.run_id = run_id if run_id is not None else random.getrandbits(40)
        TaskIdentity.run_id = self.run_id
        TaskIdentity.node_id = 0
        TaskIdentity.task_id = 1
        rng = random.Random(self.run_id)
        self.contexts = {
            rng.getrandbits(63): (i, num_nodes) for i in range(num_nodes)
        }  # node_id -> (partition-id, num-partitions)
        self._state: dict[int, Context] = {
            node: Context(
                run_id=self.run_id,
                node_id=node,
                node_config={"partition-id": pid, "num-partitions": n},
                state=RecordDict(),
                run_config=dict(run_config or {}),
            )
            for node, (pid, n) in self.contexts.items()
        }
        self._replies: dict[str, Message] = {}

    def set_run(self, run) -> None:  # noqa: D102 - not used in-process
        pass

    @property
    def run(self):  # noqa: D102
        raise NotImplementedError("LocalGrid has no Run object")

    def create_message(self, *args, **kwargs) -> Message:  # noqa: D102
        raise NotImplementedError("build messages with the Message constructor")

    def get_node_ids(self) -> Iterable[int]:
        return list(self._state)

    def get_nodes(self):  # noqa: D102
        raise NotImplementedError

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for message in messages:
            message.metadata.__dict__["_message_id"] = str(uuid4())
            message.metadata.__dict__["_run_id"] = self.run_id
            node = message.metadata.dst_node_id
            if node not in self._state:
                raise ValueError(f"unknown node {node}")
            context = self._state[node]
            reply = self.client_app(_copy(message), context)
            self._state[node] = _copy(context)
            self._replies[message.metadata.message_id] = _copy(reply)
            ids.append(message.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self._replies.pop(mid) for mid in list(message_ids) if mid in self._replies]

    def send_and_receive(self, messages, *, timeout=None):  # noqa: D102
        return self.pull_messages(self.push_messages(messages))


def _copy(obj):
    """A deep copy as the simulation engine makes it (pickled and unpickled)."""
    return pickle.loads(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))
