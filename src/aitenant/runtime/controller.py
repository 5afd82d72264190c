"""Controllers: a work queue drained by workers that call a reconciler.

The one place that interprets reconcile outcomes (controller-runtime's contract):

* ``Result()``: done; the key's backoff is forgotten.
* ``Result(requeue_after=s)``: expected wait; backoff forgotten, key re-queued after ``s``.
* ``Result(retry=True)``: a transient failure already reported (e.g. in the status);
  re-queued with per-key exponential backoff, like an exception.
* an exception: unexpected failure; re-queued with per-key exponential backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NamedTuple

from aitenant.runtime.metrics import Metrics
from aitenant.runtime.queue import ShutDown, WorkQueue

log = logging.getLogger(__name__)


class Key(NamedTuple):
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class Result:
    requeue_after: float | None = None
    retry: bool = False


Reconcile = Callable[[Key], Awaitable[Result]]


class Controller:
    def __init__(
        self,
        name: str,
        reconcile: Reconcile,
        *,
        metrics: Metrics,
        workers: int = 4,
        queue: WorkQueue[Key] | None = None,
    ) -> None:
        self.name = name
        self.reconcile = reconcile
        self.metrics = metrics
        self.workers = workers
        self.queue: WorkQueue[Key] = queue or WorkQueue()
        metrics.init_controller(name)

    def enqueue(self, key: Key, *, low_priority: bool = False) -> None:
        self.queue.add(key, low_priority=low_priority)
        self.metrics.queue_depth.labels(self.name).set(len(self.queue))

    async def run(self) -> None:
        """Run the workers until cancelled."""
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(self.workers):
                    group.create_task(self._worker())
        finally:
            self.queue.shutdown()

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            self.metrics.queue_depth.labels(self.name).set(len(self.queue))
            try:
                await self.process(key)
            finally:
                self.queue.done(key)

    async def process(self, key: Key) -> None:
        started = time.perf_counter()
        try:
            result = await self.reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            delay = self.queue.add_rate_limited(key)
            self.metrics.reconcile_total.labels(self.name, "error").inc()
            log.warning(
                "%s %s: reconcile failed, retry in %.2fs: %s",
                self.name,
                key,
                delay,
                exc,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
            return
        finally:
            self.metrics.reconcile_seconds.labels(self.name).observe(time.perf_counter() - started)
        if result.retry:
            self.queue.add_rate_limited(key)
            self.metrics.reconcile_total.labels(self.name, "error").inc()
            return
        self.queue.forget(key)
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)
            self.metrics.reconcile_total.labels(self.name, "requeue").inc()
        else:
            self.metrics.reconcile_total.labels(self.name, "success").inc()
