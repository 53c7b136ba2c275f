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


def _shared_offset(t: int) -> tuple[int, int]:
    import os

    from vflfs.ml.parallel import shared

    if t == 13:
        raise ValueError("task 13 fails")
    return t + shared()["offset"], os.getpid()


def test_standing_map_keeps_its_workers_order_and_errors():
    """Tasks split over this process and a kept worker (forked once: the same process on the
    next call), results in task order with each call's own inputs; a task's error is raised
    here and leaves no reply behind; a worker that died is replaced on the next call, and one
    that dies during a call fails that call only."""
    import os
    import signal
    import time

    from vflfs.ml.parallel import kept_workers, standing_map

    first = standing_map(_shared_offset, list(range(8)), 2, offset=100)
    assert [v for v, _ in first] == [100 + t for t in range(8)]
    pids = {pid for _, pid in first}
    assert os.getpid() in pids and len(pids) == 2
    second = standing_map(_shared_offset, list(range(5)), 2, offset=-1)
    assert [v for v, _ in second] == [t - 1 for t in range(5)]
    assert {pid for _, pid in second} == pids
    with pytest.raises(ValueError, match="task 13"):
        standing_map(_shared_offset, [12, 13, 14], 2, offset=0)  # 13 runs in the kept worker
    assert [v for v, _ in standing_map(_shared_offset, [1, 2], 2, offset=0)] == [1, 2]
    (dead,) = [pid for pid in kept_workers() if pid in pids]
    os.kill(dead, signal.SIGKILL)
    time.sleep(0.2)
    again = standing_map(_shared_offset, [1, 2], 2, offset=0)
    assert [v for v, _ in again] == [1, 2] and dead not in {pid for _, pid in again}
    assert standing_map(_shared_offset, [1, 2], 1, offset=5) == [(6, os.getpid()), (7, os.getpid())]
    from vflfs.ml import parallel

    (conn, process) = parallel._STANDING[0]
    (_, worker_pid) = standing_map(_shared_offset, [1, 2], 2, offset=0)[1]
    assert worker_pid == process.pid
    with pytest.raises(RuntimeError, match="ended unexpectedly"):
        standing_map(_kill_self, [0, 1], 2)
    assert [v for v, _ in standing_map(_shared_offset, [1, 2], 2, offset=0)] == [1, 2]


def _kill_self(t: int) -> int:
    import os

    if t:
        os._exit(1)  # the kept worker dies during the call
    return t
