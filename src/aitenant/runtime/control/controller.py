"""Controllers: a work queue drained by workers that call a reconciler.

A reconcile ends in exactly one of three outcomes, each its own type, so a contradictory one
(retry *and* requeue after 30 s) cannot be built:

* ``Done()``: nothing more to do until an event; the key's backoff is forgotten.
* ``RequeueAfter(s)``: an expected wait; backoff forgotten, the key is queued again after ``s``.
* ``Retry(why)``: a failure worth trying again soon (already reported, e.g. in the status);
  queued again with per-key exponential backoff, which grows while the failure lasts.

An exception escaping the reconciler is an unexpected failure: ``settle`` turns it into
``Retry``, so every outcome goes through the one ``match`` there (controller-runtime's
contract). A transient one (``is_transient``: a conflict, throttling, a dropped connection) is
routine and logged as a retry, and so is a 404 (an object deleted while the pass ran: the next
pass sees it gone); any other is a bug or a refusal an operator must see, so it is logged at
ERROR with its traceback. A failure the reconciler reports itself (in the status, say) it
maps to one of the three outcomes on its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias

from aitenant.runtime.cache.informer import Informer
from aitenant.runtime.client.api_errors import is_not_found, is_transient
from aitenant.runtime.control.queue import ShutDown, WorkQueue
from aitenant.runtime.serving.metrics import Metrics

log = logging.getLogger(__name__)


class Key(NamedTuple):
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Done:
    """Nothing more to do until an event brings the key back."""


@dataclass(frozen=True, slots=True)
class RequeueAfter:
    """Look again after ``seconds`` (waiting on something no watch reports)."""

    seconds: float

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise ValueError(f"RequeueAfter needs a positive delay, not {self.seconds!r}")


@dataclass(frozen=True, slots=True)
class Retry:
    """Try again soon, with the key's exponential backoff; ``why`` is logged."""

    why: str = ""


Result: TypeAlias = Done | RequeueAfter | Retry
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
        caches: Sequence[Informer] = (),
    ) -> None:
        self.name = name
        self.reconcile = reconcile
        # The informers its passes read: the workers start once these have synced (a pass
        # before that would read from the API what the cache is about to hold).
        self.caches = tuple(caches)
        self.metrics = metrics
        self.workers = workers
        self.queue: WorkQueue[Key] = queue or WorkQueue()
        metrics.init_controller(name)

    def enqueue(self, key: Key, *, low_priority: bool = False) -> None:
        self.queue.add(key, low_priority=low_priority)
        self.metrics.queue_depth.labels(self.name).set(len(self.queue))

    async def run(self) -> None:
        """Wait for the caches, then run the workers until cancelled."""
        try:
            started = time.monotonic()
            await asyncio.gather(*(informer.synced.wait() for informer in self.caches))
            log.info(
                "controller %s: caches synced in %.2f s (%d objects); starting %d workers",
                self.name,
                time.monotonic() - started,
                sum(len(informer) for informer in self.caches),
                self.workers,
            )
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

    async def process(self, key: Key) -> Result:
        """Reconcile ``key`` once and schedule what its outcome asks for; returns the outcome."""
        started = time.perf_counter()
        try:
            result = await self.reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if is_transient(exc) or is_not_found(exc):
                log.debug("%s %s: reconcile raised", self.name, key, exc_info=True)
            else:
                log.error("%s %s: reconcile failed", self.name, key, exc_info=True)
            result = Retry(f"reconcile failed: {exc!r}")
        finally:
            self.metrics.reconcile_seconds.labels(self.name).observe(time.perf_counter() - started)
        self.settle(key, result)
        return result

    def settle(self, key: Key, result: Result) -> None:
        """The one place that turns an outcome into queue operations and metrics."""
        match result:
            case Retry(why=why):
                delay = self.queue.add_rate_limited(key)
                outcome = "error"
                log.warning("%s %s: retry in %.2fs: %s", self.name, key, delay, why or "-")
            case RequeueAfter(seconds=seconds):
                self.queue.forget(key)
                self.queue.add_after(key, seconds)
                outcome = "requeue"
            case Done():
                self.queue.forget(key)
                outcome = "success"
        self.metrics.reconcile_total.labels(self.name, outcome).inc()
