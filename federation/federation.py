"""The server's view of the parties: send a request, gather the replies.

Strategies call :meth:`Federation.broadcast` and :meth:`Federation.send` with an operation of
:mod:`vflfs.protocol` and its typed requests, get its typed replies, and never build Flower
messages themselves. The federation runs over any Flower ``Grid``:
the simulation engine's, the deployment engine's, or :class:`~vflfs.federation.LocalGrid`.

Every request carries its :class:`~vflfs.protocol.Delivery` (this federation's session and the
exchange's step number). A request Flower reports lost (its party's node unavailable, the
message or reply expired) is sent again once the node is back, for up to ``outage_timeout``
seconds (:mod:`.outage`); a party that applied it already answers with the reply it kept.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from itertools import count
from typing import TypeVar

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid

from vflfs.protocol import INFO, Body, Delivery, InfoReply, Operation, ProtocolError

from .outage import LOST_STATE, Outages, log, lost
from .payload import decode, decode_error, encode
from .traffic import DOWN, UP, Traffic

Observer = Callable[[str, int, str, RecordDict], None]
"""Called with (direction, party index, operation name, content) for every message."""

Req = TypeVar("Req", bound=Body)
Rep = TypeVar("Rep", bound=Body)


class PartyError(RuntimeError):
    """A party failed, or did not answer in time. The message names the party."""

    def __init__(self, party: int | None, operation: Operation | str, detail: str) -> None:
        operation = str(operation)
        who = "the federation" if party is None else f"party {party}"
        super().__init__(f"{who} failed in {operation!r}: {detail}")
        self.party = party
        self.operation = operation


class Unanswered(PartyError):
    """Parties that sent no reply within ``federation.timeout``."""

    def __init__(self, slots: list[int], operation: Operation | str, timeout: float) -> None:
        missing = ", ".join(f"party {p}" for p in slots)
        super().__init__(
            slots[0],
            operation,
            f"no reply within {timeout:.0f} s from {missing} (is its SuperNode running?)",
        )
        self.slots = slots


class Federation:
    """Parties reached through a Flower ``Grid``, indexed 0..M-1 by their partition id."""

    def __init__(
        self,
        grid: Grid,
        num_parties: int,
        *,
        timeout: float = 600.0,
        connect_timeout: float = 120.0,
        poll_interval: float = 0.001,
        observers: list[Observer] | None = None,
        outage_timeout: float = 180.0,
    ) -> None:
        self.grid = grid
        self.num_parties = num_parties
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.poll_interval = poll_interval
        self.outage_timeout = outage_timeout
        self.observers = list(observers or [])
        self.traffic = Traffic()
        self.node_ids: list[int] = []
        self.party_info: list[InfoReply] = []
        self._session = uuid.uuid4().hex[:12]  # this federation's requests, for the parties
        self._step = count()

    # -- connection -------------------------------------------------------------------------
    def connect(self) -> list[InfoReply]:
        """Wait for the parties' nodes, then order them by the partition id they report."""
        deadline = time.monotonic() + self.connect_timeout
        while len(nodes := sorted(self.grid.get_node_ids())) < self.num_parties:
            if time.monotonic() > deadline:
                raise PartyError(
                    None,
                    "connect",
                    f"expected {self.num_parties} parties but {len(nodes)} node(s) connected "
                    f"within {self.connect_timeout:.0f} s. Start one SuperNode per party (in "
                    f"simulation: --federation-config 'num-supernodes={self.num_parties}').",
                )
            time.sleep(0.05)
        if len(nodes) > self.num_parties:
            raise PartyError(
                None,
                "connect",
                f"{len(nodes)} nodes connected but the config has {self.num_parties} parties; "
                "set split.num_parties to the number of SuperNodes.",
            )
        requests = dict.fromkeys(range(len(nodes)), INFO.request())
        try:
            replies = self._exchange(INFO, dict(enumerate(nodes)), requests)
        except Unanswered as error:  # slots, not partitions, before the replies: name nodes
            silent = ", ".join(f"node {nodes[slot]}" for slot in error.slots)
            raise PartyError(
                None,
                "connect",
                f"{silent} connected but did not answer {INFO.name!r} within "
                f"{self.timeout:g} s (federation.timeout). A SuperNode can hold on to a "
                "ClientApp of a run stopped with `flwr stop` (Flower 1.42); fix: restart that "
                "SuperNode and run again (with resume=true to continue from the checkpoint; "
                "docs/deployment.md, 'Resuming a stopped run')",
            ) from None
        by_partition: dict[int, tuple[int, InfoReply]] = {}
        for slot, info in replies.items():
            pid = int(info.partition_id)
            if not 0 <= pid < self.num_parties or pid in by_partition:
                twice = f" as node {by_partition[pid][0]} does" if pid in by_partition else ""
                raise PartyError(
                    None,
                    "connect",
                    f"node {nodes[slot]} reports partition-id {pid}{twice}; each party needs a "
                    f"distinct partition-id in 0..{self.num_parties - 1} in its node config; "
                    "fix: stop the node that does not own that partition (federation.party_keys "
                    "makes every party prove its partition).",
                )
            by_partition[pid] = (nodes[slot], info)
        self.node_ids = [by_partition[p][0] for p in range(self.num_parties)]
        self.party_info = [by_partition[p][1] for p in range(self.num_parties)]
        return self.party_info

    # -- requests ---------------------------------------------------------------------------
    def broadcast(self, operation: Operation[Req, Rep], request: Req | None = None) -> list[Rep]:
        """Send the same request (default: the operation's request without entries) to every
        party; replies in party order."""
        request = operation.request() if request is None else request
        replies = self.send(operation, dict.fromkeys(range(self.num_parties), request))
        return [replies[m] for m in range(self.num_parties)]

    def send(self, operation: Operation[Req, Rep], requests: Mapping[int, Req]) -> dict[int, Rep]:
        """Send each listed party its request; replies keyed by party index.

        Traffic counts under the current phase, except the reply entries the operation files
        under another phase (e.g. evaluation embeddings that ride on a training round-trip).
        """
        if not self.node_ids:
            raise PartyError(None, operation, "not connected; call connect() first")
        nodes = {m: self.node_ids[m] for m in requests}
        return self._exchange(operation, nodes, requests)

    def _exchange(
        self, operation: Operation[Req, Rep], nodes: Mapping[int, int], requests: Mapping[int, Req]
    ) -> dict[int, Rep]:
        delivery = Delivery(self._session, next(self._step))
        outgoing: dict[int, Message] = {}
        for party, node in nodes.items():
            content = encode(requests[party].to_payload())
            outgoing[party] = Message(
                content, dst_node_id=node, message_type=operation.name, group_id=delivery.group_id
            )
            self.traffic.record(outgoing[party], DOWN)
            self._notify(DOWN, party, operation.name, content)
        sent = dict(zip(self.grid.push_messages(list(outgoing.values())), outgoing, strict=True))
        replies = self._gather(operation, sent, outgoing)
        self.traffic.round_trips[self.traffic.phase] += 1
        return replies

    def _gather(
        self, operation: Operation[Req, Rep], sent: dict[str, int], outgoing: dict[int, Message]
    ) -> dict[int, Rep]:
        waiting = dict(sent)
        replies: dict[int, Rep] = {}
        outages = Outages(self.outage_timeout)
        deadline = time.monotonic() + self.timeout
        while waiting:
            for reply in self.grid.pull_messages(list(waiting)):
                party = waiting.pop(reply.metadata.reply_to_message_id)
                if outages.enabled() and lost(reply):
                    again = self._send_again(operation, party, outgoing[party], reply, outages)
                    waiting[again] = party
                    deadline = time.monotonic() + self.timeout
                    continue
                replies[party] = self._unpack(party, operation, reply)
                outages.ended(party)
            if waiting:
                if time.monotonic() > deadline:
                    raise Unanswered(sorted(waiting.values()), operation, self.timeout)
                time.sleep(self.poll_interval)
        return {party: replies[party] for party in sorted(replies)}  # party order, not arrival

    def _send_again(
        self, operation: Operation, party: int, message: Message, reply: Message, outages: Outages
    ) -> str:
        """Send ``message`` again once its node is online (Flower reported it lost in
        ``reply``); its new message id. Past ``outage_timeout`` the run ends."""
        if outages.resent(party):
            time.sleep(outages.pause)  # lost again: not in a tight loop
        else:
            log.warning(
                "party %d: %r was lost (Flower error %d: %s); sending it again once its node is "
                "back (federation.outage_timeout=%.0f s)",
                party, operation.name, reply.error.code, reply.error.reason, outages.timeout,
            )  # fmt: skip
        outages.begin(party)
        node = message.metadata.dst_node_id
        while outages.expired(party) or node not in set(self.grid.get_node_ids()):
            if outages.expired(party):
                raise PartyError(
                    party,
                    operation,
                    f"it was unreachable for more than {outages.timeout:.0f} s "
                    f"(federation.outage_timeout; Flower error {reply.error.code}: "
                    f"{reply.error.reason})",
                )
            if (new := self._newcomer(party, outages.probed)) is not None:
                raise PartyError(
                    party,
                    operation,
                    f"its SuperNode came back as a new node ({new}), without the party's state "
                    "(a restarted SuperNode without SuperNode authentication registers anew)",
                )
            time.sleep(outages.pause)
        again = Message(
            message.content,
            dst_node_id=node,
            message_type=message.metadata.message_type,
            group_id=message.metadata.group_id,
        )
        self.traffic.record(again, DOWN)
        (mid,) = self.grid.push_messages([again])
        return mid

    def _newcomer(self, party: int, probed: set[int]) -> int | None:
        """A node that joined after :meth:`connect` and reports ``party``'s partition, or None.
        Each new node is asked once (``query.info``); the answer only ends the run, so it
        needs no identity proof."""
        if not self.node_ids:
            return None  # still connecting
        for node in set(self.grid.get_node_ids()) - set(self.node_ids) - probed:
            probed.add(node)
            request = Message(
                encode(INFO.request().to_payload()),
                dst_node_id=node,
                message_type=INFO.name,
                group_id=Delivery(self._session, next(self._step)).group_id,
            )
            (mid,) = self.grid.push_messages([request])
            deadline = time.monotonic() + min(self.timeout, 60.0)
            while not (replies := list(self.grid.pull_messages([mid]))):
                if time.monotonic() > deadline:
                    break
                time.sleep(self.poll_interval)
            for reply in replies:
                if not reply.has_error() and decode_error(reply.content) is None:
                    info = INFO.reply.from_payload(decode(reply.content))
                    if int(info.partition_id) == party:
                        return node
        return None

    def _unpack(self, party: int, operation: Operation[Req, Rep], reply: Message) -> Rep:
        if reply.has_error():
            raise PartyError(
                party, operation, f"Flower error {reply.error.code}: {reply.error.reason}"
            )
        self.traffic.record(reply, UP, dict(operation.reply_phases))
        self._notify(UP, party, operation.name, reply.content)
        error = decode_error(reply.content)
        if error is not None and error.type == LOST_STATE:
            raise PartyError(
                party,
                operation,
                f"{error.type}: {error.message}; a SuperNode that restarted during the run has "
                "lost its party's state (Flower keeps it in that process's memory)",
            )
        if error is not None:
            raise PartyError(party, operation, f"{error.type}: {error.message}")
        try:
            return operation.reply.from_payload(decode(reply.content))
        except ProtocolError as bad:
            raise PartyError(party, operation, str(bad)) from bad

    def _notify(self, direction: str, party: int, operation: str, content: RecordDict) -> None:
        for observer in self.observers:
            observer(direction, party, operation, content)
