"""Flower's bare echo ClientApp for :mod:`benchmarks.roundtrip`: it imports Flower only.

It answers the two messages the benchmark's server sends: who the node is (the reply that
:class:`vflfs.federation.Federation`'s ``connect`` decodes as an ``InfoReply``) and a step-sized
message, whose content it sends straight back. The action names are the protocol's ``INFO`` and
``STEP`` actions (checked by the server), written out so that nothing but Flower is imported.
"""

from __future__ import annotations

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

INFO_ACTION = "info"
STEP_ACTION = "step"

app = ClientApp()


@app.query(INFO_ACTION)
def info(msg: Message, context: Context) -> Message:
    """The node's partition id, as the payload codec writes it (a ``config`` record)."""
    pid = int(context.node_config["partition-id"])
    return Message(RecordDict({"config": ConfigRecord({"partition_id": pid})}), reply_to=msg)


@app.train(STEP_ACTION)
def step(msg: Message, context: Context) -> Message:
    """Send the content straight back."""
    return Message(msg.content, reply_to=msg)
