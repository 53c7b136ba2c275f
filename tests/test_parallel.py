"""The fork pool and the threads of the Paillier work (ml/parallel.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Flower's processes handle SIGTERM themselves. A pool ended by terminate() sends SIGTERM to its
# workers, and a worker forked an instant earlier may still carry the parent's handler and
# survive it, leaving the parent in join() for ever. The script below gives the workers a
# parent that ignores SIGTERM and keeps them from resetting it: only a pool whose workers leave
# on the end-of-tasks sentinel finishes.
SCRIPT = """
import signal
from vflfs.ml import parallel

signal.signal(signal.SIGTERM, signal.SIG_IGN)
parallel._default_signals = lambda: None  # the worker's window before it resets its handlers
for _ in range(5):
    assert parallel.fork_map(abs, [-1, -2, -3], workers=2) == [1, 2, 3]
print("done")
"""


def test_workers_end_without_signals():
    try:
        run = subprocess.run(
            [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("fork_map never returned: its workers ignored the pool's SIGTERM")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "done"


def test_fork_map_keeps_task_order_and_runs_serially_with_one_worker():
    from vflfs.ml.parallel import fork_map

    tasks = list(range(-10, 10))
    assert fork_map(abs, tasks, workers=2) == [abs(t) for t in tasks]
    assert fork_map(abs, tasks, workers=1) == [abs(t) for t in tasks]


def test_thread_map_keeps_order_and_releases_gmpys_lock_in_its_threads():
    """Results keep the task order, each worker thread runs with gmpy2's
    ``allow_release_gil`` and the caller's own context is left as it was; inside a running
    fork_map (whose lock it does not take) it still runs."""
    import threading

    import gmpy2

    from vflfs.ml.parallel import fork_map, thread_map

    def task(t: int) -> tuple[int, bool]:
        return -t, gmpy2.get_context().allow_release_gil

    out = thread_map(task, list(range(20)), workers=2)
    assert [v for v, _ in out] == [-t for t in range(20)]
    assert all(released for _, released in out)
    assert thread_map(task, [1, 2], workers=1) == [(-1, False), (-2, False)]
    assert not gmpy2.get_context().allow_release_gil
    nested: list = []  # on a daemon thread: a deadlock fails the test instead of hanging it
    worker = threading.Thread(
        target=lambda: nested.append(fork_map(_nested, [3, 4], workers=1)), daemon=True
    )
    worker.start()
    worker.join(60)
    assert nested == [[[-3, -4], [-4, -5]]], "thread_map inside fork_map never returned"


def _nested(t: int) -> list[int]:
    from vflfs.ml.parallel import thread_map

    return thread_map(lambda x: -x, [t, t + 1], workers=2)
