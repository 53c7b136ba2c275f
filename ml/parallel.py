"""Both cores for the Paillier work: threads for long gmpy2 operations, forks for the rest.

:func:`thread_map` runs tasks on this process's threads, each of which lets gmpy2 release the
interpreter lock inside its operations (``allow_release_gil``), so they use every core with no
fork and nothing pickled. It pays for long operations only: a CRT decryption's two
``powmod``s (1.3-1.6 ms each at 2048 bits; 1.9-2.0x on 2 cores), not a product mod n^2 (~4 us,
about what handing the lock between threads costs: no gain measured). :func:`fork_map` forks
workers (15-25 ms per call in a process that holds torch) for the rest: products, the
alignment's hashing, whose tasks read the large inputs through :func:`shared`.
:func:`standing_map` forks its workers once and keeps them, for calls that come often with
inputs of kilobytes (the secure layer's steps), which it pickles to them. Without ``fork``
(macOS, Windows) or with one worker, both run the tasks in this process.
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


def standing_map(
    fn: Callable[[Any], Any], tasks: Sequence[Any], workers: int, **inputs: Any
) -> list:
    """``[fn(t) for t in tasks]`` on this process and ``workers - 1`` processes forked once and
    kept, for calls that come often with inputs of kilobytes (the secure layer's steps): no
    fork per call (15-25 ms in a process that holds torch). Each kept process gets its share
    of the tasks and the inputs pickled in one message, sent before this process starts on its
    own share (every ``workers``-th task); they keep what they cache (DJN tables). (A kept
    ``multiprocessing.Pool`` hands tasks over on a thread of its own, which waits for the
    interpreter lock while this process computes: slower, measured.)"""
    if workers <= 1 or len(tasks) <= 1 or "fork" not in mp.get_all_start_methods():
        return fork_map(fn, tasks, 1, **inputs)
    tasks, workers = list(tasks), min(workers, len(tasks))
    with _STANDING_LOCK:
        kept = _standing(workers - 1)[: workers - 1]
        jobs = [(fn, inputs, tasks[w::workers]) for w in range(1, workers)]
        sent = [_send(worker, job) for worker, job in zip(kept, jobs, strict=True)]
        out: list[Any] = [None] * len(tasks)
        try:
            out[::workers] = fork_map(fn, tasks[::workers], 1, **inputs)
        finally:  # every reply is read, so that none is left for the next call
            replies = [
                _reply(worker) if ok else _lost(worker)
                for worker, ok in zip(kept, sent, strict=True)
            ]
        for w, (status, value) in enumerate(replies, start=1):
            if status != "ok":
                raise value
            out[w::workers] = value
    return out


_STANDING: list = []  # this process's kept workers: (its end of their pipe, their process)
_STANDING_LOCK = threading.Lock()


def _standing(count: int) -> list:
    """At least ``count`` kept workers: those alive, and new ones forked now."""
    _STANDING[:] = [(conn, process) for conn, process in _STANDING if process.is_alive()]
    context = mp.get_context("fork")
    while len(_STANDING) < count:
        mine, theirs = context.Pipe()
        inherited = [mine, *(conn for conn, _ in _STANDING)]  # closed there: EOF when we end
        process = context.Process(target=_serve, args=(theirs, inherited), daemon=True)
        process.start()
        theirs.close()
        _STANDING.append((mine, process))
    return _STANDING


def kept_workers() -> list[int]:
    """The process ids of this process's kept workers (:func:`standing_map`)."""
    return [process.pid for _, process in _STANDING]


def _send(worker: tuple, job: tuple) -> bool:
    try:
        worker[0].send(job)
        return True
    except OSError:  # the worker died since
        return False


def _reply(worker: tuple) -> tuple[str, Any]:
    """("ok", results) or ("error", the exception to raise)."""
    try:
        return worker[0].recv()
    except EOFError:
        return _lost(worker)


def _lost(worker: tuple) -> tuple[str, Any]:
    """A worker that died: dropped (a new one is forked on the next call), its share failed."""
    if worker in _STANDING:
        _STANDING.remove(worker)
    return "error", RuntimeError("a kept worker process ended unexpectedly; run it again")


def _serve(conn, inherited: list) -> None:
    """A kept worker: run each job it is sent, reply with its results or its error; leave when
    its parent closes the pipe or ends."""
    _default_signals()
    for other in inherited:
        other.close()
    while True:
        try:
            fn, inputs, tasks = conn.recv()
        except EOFError:  # the parent closed its end or ended
            return
        _SHARED.clear()
        _SHARED.update(inputs)
        try:
            reply = ("ok", [fn(t) for t in tasks])
        except BaseException as error:  # sent back and raised in the parent
            reply = ("error", error)
        finally:
            _SHARED.clear()
        try:
            conn.send(reply)
        except Exception as error:  # an error or a result that cannot be pickled
            conn.send(("error", RuntimeError(f"{type(error).__name__}: {error}")))


os.register_at_fork(after_in_child=_STANDING.clear)  # a forked child has none of them


def _default_signals() -> None:
    """Forked workers drop the parent's signal handlers (Flower's SIGTERM handler would end the
    parent's task when the pool terminates its workers)."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
