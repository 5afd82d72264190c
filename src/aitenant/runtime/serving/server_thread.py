"""A server on an event loop of its own, in a thread: for the admission webhook, whose answer
the API server waits for while a user waits for the API server.

On the process's main loop a review waits behind whatever step is running (a reconcile, a list
page being decoded) and every callback queued before it. On its own loop it waits only for the
interpreter lock, which the main thread hands over within the switch interval (docs/design.md
§9.7 has the figures; on a quiet controller the difference is a millisecond or two). What the
server reads of the main loop's state must be safe to read from another thread (the informer's
indexes take a lock for that).

    thread = await ServerThread.start("webhook", start_webhook_server)
    ...
    await thread.cleanup()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Protocol

log = logging.getLogger(__name__)

_JOIN_TIMEOUT = 10.0


class Server(Protocol):
    """What a started server offers its owner: a way to stop it (``web.AppRunner`` has it)."""

    async def cleanup(self) -> None: ...


class ServerThread:
    """Runs ``start()`` on a new event loop in a daemon thread and keeps that loop serving
    until ``cleanup()``. Use the ``start`` class method: it returns once the server listens,
    and raises what ``start()`` raised (a bad certificate, a port in use) in the caller."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._stop_requested = False

    @classmethod
    async def start(cls, name: str, start: Callable[[], Awaitable[Server]]) -> ServerThread:
        self = cls(name)
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=lambda: self._run(start, started), name=name, daemon=True
        )
        self._thread.start()
        try:
            await asyncio.wrap_future(started)
        except BaseException:
            await asyncio.to_thread(self._thread.join, _JOIN_TIMEOUT)
            raise
        return self

    def _run(
        self, start: Callable[[], Awaitable[Server]], started: concurrent.futures.Future[None]
    ) -> None:
        try:
            asyncio.run(self._serve(start, started))
        except BaseException:
            # /healthz reports it (``problem``); the log says why.
            log.exception("%s thread ended", self.name)

    async def _serve(
        self, start: Callable[[], Awaitable[Server]], started: concurrent.futures.Future[None]
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        try:
            server = await start()
        except BaseException as exc:
            with contextlib.suppress(concurrent.futures.InvalidStateError):  # nobody waits
                started.set_exception(exc)
            return
        try:
            started.set_result(None)
        except concurrent.futures.InvalidStateError:
            # The owner stopped waiting while the server came up (the process is stopping):
            # nobody will call cleanup(), so stop it here and let the thread end.
            await server.cleanup()
            return
        try:
            await self._stopping.wait()
        finally:
            await server.cleanup()

    def problem(self) -> str | None:
        """Why the server no longer serves (its thread ended without being asked), else None:
        for ``/healthz``, so that the supervisor restarts a process whose webhook died."""
        if self._thread is None or self._thread.is_alive() or self._stop_requested:
            return None
        return f"{self.name} thread has stopped"

    async def cleanup(self) -> None:
        """Stop the server (its own cleanup runs on its loop) and wait for the thread to end."""
        self._stop_requested = True
        if self._loop is not None and self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # its loop has already closed
                self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, _JOIN_TIMEOUT)
            if self._thread.is_alive():
                log.warning("%s thread still running %.0f s after stop", self.name, _JOIN_TIMEOUT)
