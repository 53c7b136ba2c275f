"""Obfuscators made ahead of time, off the critical path of a protocol step.

Every encryption and re-randomisation multiplies by a fresh obfuscator (``h_s^alpha`` or
``r^n``, :mod:`.djn`); none depends on the values, so they can be made while a side waits for
the other. A :class:`ObfuscatorPool` keeps a stock of them: :meth:`~ObfuscatorPool.take` draws
from the stock (and makes the rest on the spot), :meth:`~ObfuscatorPool.fill` tops it up, and a
background thread tops it up by itself while nobody holds :meth:`~ObfuscatorPool.working` (the
thread shares the interpreter lock, so it only helps while the caller waits on the network or
the other side). Each obfuscator is used once: taking removes it from the stock.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gmpy2 import mpz


class ObfuscatorPool:
    """A stock of at most ``capacity`` obfuscators from ``draw`` (a CSPRNG-backed maker)."""

    def __init__(self, draw: Callable[[], mpz], capacity: int, background: bool = True) -> None:
        if capacity < 0:
            raise ValueError(f"pool capacity must be >= 0, got {capacity}")
        self.draw, self.capacity = draw, int(capacity)
        self._stock: deque[mpz] = deque()
        self._pid = os.getpid()
        self._busy = 0
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._wanted = threading.Event()
        self._wanted.set()
        self._closed = False
        if background and capacity:
            threading.Thread(target=self._refill, name="vflfs-obfuscators", daemon=True).start()

    def __len__(self) -> int:
        return len(self._stock)

    def take(self, count: int, make: bool = True) -> list[mpz]:
        """``count`` obfuscators: from the stock first, the rest made now (``make=False``: only
        what the stock holds, maybe fewer). A forked child never uses its copy of the stock
        (its parent hands those out)."""
        out: list[mpz] = []
        while len(out) < count and os.getpid() == self._pid:
            try:
                out.append(self._stock.popleft())
            except IndexError:
                break
        self._wanted.set()
        return out + [self.draw() for _ in range(count - len(out) if make else 0)]

    def fill(self, count: int | None = None) -> int:
        """Make obfuscators until the stock holds ``count`` (default: capacity); how many made."""
        target, made = min(self.capacity, self.capacity if count is None else count), 0
        while len(self._stock) < target:
            self._stock.append(self.draw())
            made += 1
        return made

    @contextmanager
    def working(self) -> Iterator[None]:
        """While held, the background thread pauses (it would compete for the interpreter)."""
        with self._lock:
            self._busy += 1
            self._idle.clear()
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1
                if not self._busy:
                    self._idle.set()

    def close(self) -> None:
        """Stop the background thread and drop the stock."""
        self._closed = True
        self._stock.clear()
        self._idle.set()
        self._wanted.set()

    def _refill(self) -> None:
        while not self._closed:
            self._idle.wait()
            self._wanted.clear()
            if len(self._stock) >= self.capacity:
                self._wanted.wait()
                continue
            self._stock.append(self.draw())
