"""Both cores for the Paillier work: a fork pool over chunks of independent tasks.

Forked workers inherit the large inputs (ciphertexts, bins) through :func:`shared`, so only the
small task descriptions and the results are pickled. Without ``fork`` (macOS, Windows) or with
one worker, the tasks run in this process. Each call forks its own short-lived pool, so nothing
outlives the party operation or protocol step that asked for it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_SHARED: dict[str, Any] = {}
_LOCK = threading.Lock()  # one fork_map at a time per process: _SHARED is process-wide


def shared() -> dict[str, Any]:
    """The inputs installed by the running :func:`fork_map` (read them in the task function)."""
    return _SHARED


def resolve_workers(workers: int | None) -> int:
    """``None`` or 0: every CPU this process may use."""
    if workers:
        return max(1, int(workers))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def chunks(count: int, workers: int, per_worker: int = 4) -> list[np.ndarray]:
    """Index chunks of ``range(count)``: ``per_worker`` per worker (load balance), one if serial."""
    parts = 1 if workers <= 1 else min(count, workers * per_worker)
    return [c for c in np.array_split(np.arange(count), max(parts, 1)) if c.size]


def fork_map(fn: Callable[[Any], Any], tasks: Sequence[Any], workers: int, **inputs: Any) -> list:
    """``[fn(t) for t in tasks]``, on ``workers`` forked processes that see ``inputs``."""
    with _LOCK:
        _SHARED.clear()
        _SHARED.update(inputs)
        try:
            if workers <= 1 or len(tasks) <= 1 or "fork" not in mp.get_all_start_methods():
                return [fn(t) for t in tasks]
            pool = mp.get_context("fork").Pool(
                min(workers, len(tasks)), initializer=_default_signals
            )
            try:
                results = pool.map(fn, tasks, chunksize=1)
            except BaseException:
                pool.terminate()
                raise
            # Workers leave on the end-of-tasks sentinel: no signal, so a worker that has not
            # yet dropped the parent's handlers (Flower's SIGTERM handler) cannot ignore it.
            pool.close()
            pool.join()
            return results
        finally:
            _SHARED.clear()


def _default_signals() -> None:
    """Forked workers drop the parent's signal handlers (Flower's SIGTERM handler would end the
    parent's task when the pool terminates its workers)."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
