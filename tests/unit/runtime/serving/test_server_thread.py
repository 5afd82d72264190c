"""A server on its own loop and thread: it answers while the main loop is busy, a failed start
is raised to the caller, and cleanup stops it."""

from __future__ import annotations

import asyncio
import threading
import urllib.error
import urllib.request

import pytest
from aiohttp import web

from aitenant.runtime.serving.server_thread import ServerThread


def hello_app(served_on: list[str]) -> web.Application:
    async def hello(_: web.Request) -> web.Response:
        served_on.append(threading.current_thread().name)
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    return app


async def serve(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, runner.addresses[0][1]


def get(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
        return resp.read().decode()


async def test_it_answers_while_the_main_loop_is_blocked() -> None:
    served_on: list[str] = []
    ports: list[int] = []

    async def start() -> web.AppRunner:
        runner, port = await serve(hello_app(served_on))
        ports.append(port)
        return runner

    thread = await ServerThread.start("test-server", start)
    try:
        answer: list[str] = []
        client = threading.Thread(target=lambda: answer.append(get(ports[0])))
        client.start()
        # Joining blocks the main loop, like a reconcile step that never yields: only a server
        # on another loop can answer meanwhile.
        client.join(timeout=5)
        assert answer == ["hello"], "answered before the main loop got control back"
        assert served_on == ["test-server"]
    finally:
        await thread.cleanup()


async def test_cleanup_stops_the_server_and_ends_the_thread() -> None:
    ports: list[int] = []
    cleaned: list[bool] = []

    async def start() -> web.AppRunner:
        app = hello_app([])

        async def on_cleanup(_: web.Application) -> None:
            cleaned.append(True)

        app.on_cleanup.append(on_cleanup)
        runner, port = await serve(app)
        ports.append(port)
        return runner

    thread = await ServerThread.start("test-server", start)
    assert await asyncio.to_thread(get, ports[0]) == "hello"
    await thread.cleanup()
    assert cleaned == [True]
    assert not any(t.name == "test-server" for t in threading.enumerate())
    with pytest.raises(urllib.error.URLError, match="refused"):
        await asyncio.to_thread(get, ports[0])


async def test_a_failed_start_is_raised_to_the_caller() -> None:
    async def start() -> web.AppRunner:
        raise FileNotFoundError("tls.crt")

    with pytest.raises(FileNotFoundError, match=r"tls\.crt"):
        await ServerThread.start("test-server", start)
    assert not any(t.name == "test-server" for t in threading.enumerate())


async def test_a_start_its_caller_gave_up_on_stops_the_server_and_ends_the_thread() -> None:
    # The process stopping while the webhook still starts: the server that comes up after its
    # owner left must not stay up with nobody to stop it.
    release = threading.Event()
    cleaned: list[bool] = []

    async def start() -> web.AppRunner:
        await asyncio.to_thread(release.wait, 5)
        app = hello_app([])

        async def on_cleanup(_: web.Application) -> None:
            cleaned.append(True)

        app.on_cleanup.append(on_cleanup)
        runner, _ = await serve(app)
        return runner

    starting = asyncio.ensure_future(ServerThread.start("test-server", start))
    await asyncio.sleep(0.05)
    starting.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert cleaned == [True]
    assert not any(t.name == "test-server" for t in threading.enumerate())


async def test_a_thread_that_dies_is_reported_and_fails_healthz() -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from aitenant.runtime.serving.http import health_app

    async def start() -> web.AppRunner:
        runner, _ = await serve(hello_app([]))
        return runner

    thread = await ServerThread.start("admission-webhook", start)
    async with TestClient(TestServer(health_app([], [thread.problem]))) as health:
        assert thread.problem() is None
        assert (await health.get("/healthz")).status == 200
        # Its loop ends without anyone asking (what an unhandled failure would do).
        loop = thread._loop  # pyright: ignore[reportPrivateUsage]
        assert loop is not None
        loop.call_soon_threadsafe(loop.stop)
        for _ in range(100):
            if thread.problem() is not None:
                break
            await asyncio.sleep(0.02)
        assert thread.problem() == "admission-webhook thread has stopped"
        response = await health.get("/healthz")
        assert response.status == 500
        assert await response.text() == "admission-webhook thread has stopped"
    await thread.cleanup()
    assert thread.problem() is None, "asked to stop: not a failure"
