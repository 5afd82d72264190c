"""The manager runs every part of the process in one TaskGroup and shuts it down cleanly.

* Informers and HTTP servers run on every replica (the webhook must answer on all of them).
  The servers start alongside the informers, not before them: building a server may import
  its web framework, and the first reconcile need not wait for that.
* Informers list in the order given, ``LISTS_AT_ONCE`` at a time: the caches the first
  controller reads come first, so it starts before the platform's larger caches have listed
  (docs/design.md §9.4).
* Controllers start once this replica holds the Lease (or at once without leader election),
  each when its own caches have synced; leader-only loops once ``required_informers`` have.
  Losing the Lease ends the process with an error.
* ``stop()`` (wired to SIGTERM) cancels everything and releases the Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from aitenant.runtime.cache.informer import Informer
from aitenant.runtime.control.controller import Controller
from aitenant.runtime.control.leader import LeaderElector
from aitenant.runtime.serving.server_thread import Server

log = logging.getLogger(__name__)

Runnable = Callable[[], Coroutine[Any, Any, None]]
# Lists at once at start: enough to keep the API server busy, few enough that the first ones
# are not slowed by all the others.
LISTS_AT_ONCE = 4


@dataclass
class Manager:
    informers: list[Informer] = field(default_factory=list)
    required_informers: list[Informer] = field(default_factory=list)
    controllers: list[Controller] = field(default_factory=list)
    leader_runnables: list[Runnable] = field(default_factory=list)
    runnables: list[Runnable] = field(default_factory=list)
    servers: list[Callable[[], Awaitable[Server]]] = field(default_factory=list)
    elector: LeaderElector | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _runners: list[Server] = field(default_factory=list)

    def ready_problem(self) -> str | None:
        """Not ready while an informer that a controller or the leader loops wait for has
        not synced (a kind the controller may not list shows here)."""
        needed = [*self.required_informers, *(i for c in self.controllers for i in c.caches)]
        waiting = sorted({i.kind for i in needed if not i.synced.is_set()})
        return f"informers not synced: {', '.join(waiting)}" if waiting else None

    def stop(self) -> None:
        self._stop.set()

    async def wait_synced(self) -> None:
        await asyncio.gather(*(i.synced.wait() for i in self.required_informers))

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                stopper = group.create_task(self._stop.wait())
                main = group.create_task(self._run_all())
                done, _ = await asyncio.wait({stopper, main}, return_when=asyncio.FIRST_COMPLETED)
                for task in (stopper, main):
                    if task not in done:
                        task.cancel()
        finally:
            if self.elector is not None:
                await self.elector.release()
            for runner in self._runners:
                with contextlib.suppress(Exception):
                    await runner.cleanup()
            self._runners.clear()

    async def _run_all(self) -> None:
        lists = asyncio.Semaphore(LISTS_AT_ONCE)  # first come, first served: in list order
        async with asyncio.TaskGroup() as group:
            for informer in self.informers:
                group.create_task(informer.run(lists), name=f"informer-{informer.kind}")
            await asyncio.sleep(0)  # the informers' first requests go out first
            for start_server in self.servers:
                self._runners.append(await start_server())
            for runnable in self.runnables:
                group.create_task(runnable())
            group.create_task(self._lead())

    async def _lead(self) -> None:
        started = time.monotonic()
        async with asyncio.TaskGroup() as group:
            if self.elector is not None:
                await self.elector.acquire()
                group.create_task(self.elector.hold(), name="leader-lease")
            for controller in self.controllers:  # each waits for its own caches
                group.create_task(controller.run(), name=f"controller-{controller.name}")
            await self.wait_synced()
            log.info(
                "required caches synced in %.2f s; starting leader loops",
                time.monotonic() - started,
            )
            for runnable in self.leader_runnables:
                group.create_task(runnable())
