"""A keyed work queue in the controller-runtime tradition.

* A key is queued at most once (de-duplication).
* A key is never handed to two workers at once: adding a key that is being processed marks it
  dirty, and it is queued again when the worker calls ``done``.
* ``add_after`` keeps only the earliest pending delay per key.
* ``add_rate_limited`` applies per-key exponential backoff with a cap; ``forget`` resets it.
* ``add(key, low_priority=True)`` queues behind every normal key (controller-runtime's
  priority queue): after a restart the many settled objects of the initial list wait behind
  those with work to do, so frequent restarts cannot starve the end of the list. Adding a
  queued low-priority key normally promotes it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """Raised by ``get`` once the queue is shut down and drained of waiters."""


class WorkQueue(Generic[K]):
    def __init__(self, *, base_delay: float = 0.05, max_delay: float = 30.0) -> None:
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._items: deque[K] = deque()
        self._low_items: deque[K] = deque()  # may hold promoted keys; skipped when popped
        self._low: set[K] = set()
        self._queued: set[K] = set()
        self._processing: set[K] = set()
        self._dirty: set[K] = set()
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._failures: dict[K, int] = {}
        self._nonempty = asyncio.Event()
        self._shutdown = False

    def __len__(self) -> int:
        return len(self._items) + len(self._low)

    @property
    def waiting(self) -> int:
        """Keys scheduled for later (requeue-after or backoff)."""
        return len(self._timers)

    def add(self, key: K, *, low_priority: bool = False) -> None:
        if self._shutdown:
            return
        if key in self._processing:
            self._dirty.add(key)
            return
        if key in self._queued:
            if not low_priority and key in self._low:
                self._low.discard(key)
                self._items.append(key)
            return
        self._queued.add(key)
        if low_priority:
            self._low.add(key)
            self._low_items.append(key)
        else:
            self._items.append(key)
        self._nonempty.set()

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= due:
                return
            pending[1].cancel()
        self._timers[key] = (due, loop.call_at(due, self._fire, key))

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def next_backoff(self, key: K) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return min(self._base_delay * (2**failures), self._max_delay)

    def add_rate_limited(self, key: K) -> float:
        delay = self.next_backoff(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K:
        while not self._items and not self._low:
            if self._shutdown:
                raise ShutDown
            self._nonempty.clear()
            await self._nonempty.wait()
        if self._items:
            key = self._items.popleft()
        else:
            key = self._low_items.popleft()
            while key not in self._low:  # promoted since: already taken from _items
                key = self._low_items.popleft()
            self._low.discard(key)
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def shutdown(self) -> None:
        self._shutdown = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._nonempty.set()
