"""``error.txt`` for a ServerApp that ends before its run has finished.

When the run is stopped, or Flower ends the ServerApp process (a SIGINT from its parent-process
monitor, or a SIGTERM), Flower runs its exit handlers and then ``sys.exit``: the run's own
error handling sees only a ``SystemExit``, and a process ended by Flower's force-exit timer sees
nothing at all. :func:`watch_exit` registers a handler that runs first, before that timer
starts, and writes ``error.txt`` unless the run has already left its outcome (``results.json``
or ``error.txt``); when the run has a checkpoint, its last line says that ``resume=true``
continues it.

A SuperLink that dies (its process killed) ends nothing by itself: the ServerApp's calls to it
retry for ever. :class:`SuperLinkWatch` probes the SuperLink's address and, once it has refused
connections for ``deployment.superlink_timeout`` seconds, ends the ServerApp the way Flower
does (SIGINT), so that the exit handler records why.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from vflfs.runtime.results import ERROR, RESULTS, resume_hint, write_error
from vflfs.runtime.settings import DeploymentSettings

REASON = (
    "Flower ended the ServerApp before the run finished: its SuperLink stopped or was lost, or "
    "the run was stopped (flwr stop); fix: check the SuperLink (restart it if it died) and "
    "submit the run again"
)


class RunInterrupted(RuntimeError):
    """The ServerApp was ended from outside before the run finished."""


@dataclass
class ExitWatch:
    out_dir: Path
    ended: bool = False
    reason: str = REASON

    def on_exit(self) -> None:
        if (self.out_dir / RESULTS).exists() or (self.out_dir / ERROR).exists():
            return
        self.ended = True
        write_error(self.out_dir, RunInterrupted(self.reason), resume_hint(self.out_dir))


def watch_exit(out_dir: Path) -> ExitWatch:
    """Write ``error.txt`` into ``out_dir`` if Flower's exit handlers run before an outcome."""
    from flwr.supercore.exit.exit_handler import add_exit_handler

    watch = ExitWatch(Path(out_dir))
    add_exit_handler(watch.on_exit, run_before_force_exit=True)
    return watch


class SuperLinkWatch(threading.Thread):
    """Ends this process (SIGINT) when ``address`` has refused TCP connections for
    ``timeout`` seconds; ``exit_watch.reason`` then says so."""

    def __init__(
        self, address: str, timeout: float, exit_watch: ExitWatch, interval: float = 5.0
    ) -> None:
        super().__init__(name="vflfs-superlink-watch", daemon=True)
        host, _, port = address.rpartition(":")
        self.target = (host.strip("[]") or "127.0.0.1", int(port))
        self.address, self.timeout, self.interval = address, timeout, interval
        self.exit_watch = exit_watch

    def reachable(self) -> bool:
        try:
            with socket.create_connection(self.target, timeout=self.interval):
                return True
        except OSError:
            return False

    def run(self) -> None:
        last_seen = time.monotonic()
        while True:
            time.sleep(self.interval)
            if self.reachable():
                last_seen = time.monotonic()
            elif time.monotonic() - last_seen > self.timeout:
                break
        if self.exit_watch.ended:  # Flower is already ending the process (its own monitor)
            return
        self.exit_watch.reason = (
            f"the SuperLink ({self.address}) refused connections for {self.timeout:.0f} s "
            "(deployment.superlink_timeout) before the run finished: it stopped or was lost; "
            "fix: restart the SuperLink and submit the run again"
        )
        os.kill(os.getpid(), signal.SIGINT)  # Flower's graceful exit: its handlers, ours first


def watch_superlink(
    grid, deployment: DeploymentSettings, exit_watch: ExitWatch
) -> SuperLinkWatch | None:
    """Start a :class:`SuperLinkWatch` on the deployment engine's grid (None elsewhere, or
    with ``deployment.superlink_timeout`` null)."""
    address = getattr(grid, "_addr", None)  # flwr.superlink.grid.HttpGrid's Runtime API address
    timeout = deployment.superlink_timeout
    if not address or timeout is None:
        return None
    watch = SuperLinkWatch(str(address), timeout, exit_watch)
    watch.start()
    return watch
