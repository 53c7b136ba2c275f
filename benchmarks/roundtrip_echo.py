"""The ClientApps of :mod:`benchmarks.roundtrip`: Flower's bare echo beside the vflfs app.

A ``query.echo`` message is answered by Flower alone: its content goes straight back, and the
process has imported nothing but Flower and this module. Any other message goes to the vflfs
ClientApp (:mod:`vflfs.client_app.app`), imported on that message. So one run of the
benchmark times both round-trips, one after the other, in the same deployment and under the
same load.

With ``VFLFS_ROUNDTRIP_TRACE`` set (a file path; the benchmark sets it in the SuperNodes'
environment, which their ClientApp processes inherit), every process appends one JSON line:
the message type, its partition, and on the clock that all processes of the machine share
(``CLOCK_BOOTTIME``, seconds) when the process started, when Flower's runtime had loaded this
module, when the message reached the app, when the vflfs app was loaded (vflfs messages) and
when the reply was made; and the process's CPU seconds so far.
"""

from __future__ import annotations

import json
import os
import time

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

ECHO = "query.echo"
TRACE = "VFLFS_ROUNDTRIP_TRACE"


def now() -> float:
    """Seconds on the clock every process of the machine shares (that of process starts)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def process_start() -> float:
    """When this process started, on :func:`now`'s clock (10 ms resolution)."""
    with open("/proc/self/stat") as stat:
        ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
    return ticks / os.sysconf("SC_CLK_TCK")


LOADED = now()


class Echo(ClientApp):
    """Flower's bare echo: every message's content straight back."""

    def __call__(self, message: Message, context: Context) -> Message:
        return Message(message.content, reply_to=message)


class EchoBesideVflfs(ClientApp):
    """``query.echo``: the content straight back; anything else: the vflfs ClientApp."""

    def __call__(self, message: Message, context: Context) -> Message:
        enter, vflfs = now(), None
        if message.metadata.message_type == ECHO:
            reply = Message(message.content, reply_to=message)
        else:
            from vflfs.client_app.app import app

            vflfs = now()
            reply = app(message, context)
        path = os.environ.get(TRACE)
        if path:
            times = os.times()
            line = {
                "type": message.metadata.message_type,
                "partition": int(context.node_config.get("partition-id", 0)),
                "start": process_start(),
                "loaded": LOADED,
                "enter": enter,
                "vflfs": vflfs,
                "exit": now(),
                "cpu_s": times.user + times.system,
            }
            with open(path, "a") as trace:
                trace.write(json.dumps(line) + "\n")
        return reply


app = EchoBesideVflfs()
echo = Echo()
"""The echo alone (:mod:`benchmarks.app_process` replays a step message to it)."""
