"""Byte accounting: what actually travels in Flower messages, per phase and direction."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from flwr.app import Message, RecordDict
from flwr.common.serde import array_to_proto, recorddict_to_proto
from flwr.proto.recorddict_pb2 import ArrayRecord as ProtoArrayRecord

from .payload import ARRAYS

MB = 2**20
DOWN = "down"  # server -> party
UP = "up"  # party -> server


def message_bytes(content: RecordDict) -> int:
    """Serialised size of a message's content, as Flower's protobuf encodes it."""
    return recorddict_to_proto(content).ByteSize()


def entry_bytes(content: RecordDict, entry: str) -> int:
    """Bytes that the array payload entry ``entry`` (or list ``entry#i``) takes in ``content``:
    each of its arrays' items in the array record, as encoded there (its tag and length too)."""
    if ARRAYS not in content:
        return 0
    item = ProtoArrayRecord.Item
    return sum(
        ProtoArrayRecord(items=[item(key=key, value=array_to_proto(array))]).ByteSize()
        for key, array in content[ARRAYS].items()
        if key == entry or key.startswith(f"{entry}#")
    )


@dataclass
class Traffic:
    """Bytes and message counts per (phase, direction), plus wall time per phase."""

    phase: str = "setup"
    bytes: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    messages: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    round_trips: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    @contextmanager
    def in_phase(self, phase: str) -> Iterator[None]:
        """Attribute traffic and wall time inside the block to ``phase``."""
        previous, self.phase = self.phase, phase
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - start
            self.phase = previous

    def record(
        self, message: Message, direction: str, entry_phases: Mapping[str, str] | None = None
    ) -> int:
        """Count ``message`` under the current phase, except the payload entries named in
        ``entry_phases``, whose bytes count under the phase given for them."""
        size = message_bytes(message.content)
        own = size
        for entry, phase in (entry_phases or {}).items():
            moved = entry_bytes(message.content, entry)
            if moved:
                self.bytes[(phase, direction)] += moved
                own -= moved
        self.bytes[(self.phase, direction)] += own
        self.messages[(self.phase, direction)] += 1
        return size

    def total_bytes(self, phase: str | None = None, direction: str | None = None) -> int:
        return sum(
            b
            for (p, d), b in self.bytes.items()
            if (phase is None or p == phase) and (direction is None or d == direction)
        )

    def summary(self) -> dict:
        """JSON-ready summary: bytes and MB per phase and direction."""
        phases = sorted({p for p, _ in self.bytes} | set(self.seconds))
        out: dict = {"phases": {}}
        for phase in phases:
            up, down = self.total_bytes(phase, UP), self.total_bytes(phase, DOWN)
            out["phases"][phase] = {
                "bytes_up": up,
                "bytes_down": down,
                "mb": (up + down) / MB,
                "messages_up": self.messages.get((phase, UP), 0),
                "messages_down": self.messages.get((phase, DOWN), 0),
                "round_trips": self.round_trips.get(phase, 0),
                "wall_s": self.seconds.get(phase, 0.0),
            }
        out["bytes_up"] = self.total_bytes(direction=UP)
        out["bytes_down"] = self.total_bytes(direction=DOWN)
        out["mb"] = self.total_bytes() / MB
        return out
