"""``error.txt`` for a ServerApp that Flower ends before its run has finished.

When the SuperLink is stopped or lost (its process killed) or the run is stopped, Flower ends
the ServerApp process through its exit handlers (a SIGINT from the parent-process monitor, or a
SIGTERM) and then ``sys.exit``; the run's own error handling sees only a ``SystemExit``, and a
process ended by the force-exit timer sees nothing at all. :func:`watch_exit` registers a handler
that runs first, before that timer starts, and writes ``error.txt`` unless the run has already
left its outcome (``results.json`` or ``error.txt``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vflfs.runtime.results import ERROR, RESULTS, write_error

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
        write_error(self.out_dir, RunInterrupted(self.reason))


def watch_exit(out_dir: Path) -> ExitWatch:
    """Write ``error.txt`` into ``out_dir`` if Flower's exit handlers run before an outcome."""
    from flwr.supercore.exit.exit_handler import add_exit_handler

    watch = ExitWatch(Path(out_dir))
    add_exit_handler(watch.on_exit, run_before_force_exit=True)
    return watch
