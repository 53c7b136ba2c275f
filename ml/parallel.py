"""Both cores for the Paillier work: threads for long gmpy2 operations, forks for the rest.

:func:`thread_map` runs tasks on this process's threads, each of which lets gmpy2 release the
interpreter lock inside its operations (``allow_release_gil``), so they use every core with no
fork and nothing pickled. It pays for long operations only: a CRT decryption's two
``powmod``s (1.3-1.6 ms each at 2048 bits; 1.9-2.0x on 2 cores), not a product mod n^2 (~4 us,
about what handing the lock between threads costs: no gain measured). :func:`fork_map` forks
workers (15-25 ms per call in a process that holds torch) for the rest: products, the
alignment's hashing, whose tasks read the large inputs through :func:`shared`. Without
``fork`` (macOS, Windows) or with one worker, :func:`fork_map` runs the tasks in this process.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import gmpy2
import numpy as np

_SHARED: dict[str, Any] = {}
_LOCK = threading.Lock()  # one fork_map at a time per process: _SHARED is process-wide
_EXECUTOR: dict[int, ThreadPoolExecutor] = {}  # this process's thread pool, by its size
os.register_at_fork(after_in_child=_EXECUTOR.clear)  # a forked child has none of the threads


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


def thread_map(fn: Callable[[Any], Any], tasks: Sequence[Any], workers: int) -> list:
    """``[fn(t) for t in tasks]``, on ``workers`` threads that release the interpreter lock
    inside gmpy2's operations (``fn`` must not mutate shared state). It takes neither the
    lock nor the inputs of :func:`fork_map`, so a forked worker's task may call it too."""
    if workers <= 1 or len(tasks) <= 1:
        return [fn(t) for t in tasks]
    return list(_threads(min(workers, len(tasks))).map(partial(_released, fn), tasks))


def _threads(count: int) -> ThreadPoolExecutor:
    """This process's thread pool, made on first use and grown to ``count`` threads."""
    size = max(_EXECUTOR, default=0)
    if size < count:
        if size:
            _EXECUTOR.pop(size).shutdown(wait=False)
        _EXECUTOR[count] = ThreadPoolExecutor(count, thread_name_prefix="vflfs-paillier")
        size = count
    return _EXECUTOR[size]


def _released(fn: Callable[[Any], Any], task: Any) -> Any:
    with gmpy2.context(allow_release_gil=True):  # this thread's context only
        return fn(task)


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
