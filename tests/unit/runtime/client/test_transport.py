"""The aiohttp transport under httpx2, against a real HTTP server on loopback: what a request
carries, what comes back (streamed, decoded), and which httpx2 error each failure becomes."""

from __future__ import annotations

import asyncio
import gzip
import socket
import ssl
from asyncio import sslproto
from collections.abc import AsyncIterator

import httpx2
import pytest
import trustme
from aiohttp import web

from aitenant.runtime.client.retry import RetryReads
from aitenant.runtime.client.transport import (
    TLS_READ_BUFFER,
    AiohttpTransport,
    limit_tls_read_buffers,
)


async def echo(request: web.Request) -> web.Response:
    body = await request.read()
    return web.json_response(
        {
            "method": request.method,
            "path": request.path_qs,
            "authorization": request.headers.get("Authorization"),
            "content_type": request.headers.get("Content-Type"),
            "body": body.decode(),
        },
        status=201 if request.method == "POST" else 200,
        headers={"X-Seen": "yes"},
    )


async def lines(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse()
    await response.prepare(request)
    for i in range(3):
        await response.write(f'{{"n": {i}}}\n'.encode())
        await asyncio.sleep(0.01)
    await response.write_eof()
    return response


async def gzipped(_: web.Request) -> web.Response:
    return web.Response(
        body=gzip.compress(b'{"zipped": true}'),
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )


async def slow(request: web.Request) -> web.Response:
    request.app[SLOW_CALLS].append(request.path)
    await asyncio.sleep(2)
    return web.Response(text="late")


async def cut(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Length": "1000"})
    await response.prepare(request)
    await response.write(b'{"partial":')
    assert request.transport is not None
    request.transport.close()  # the connection drops before the promised body
    return response


HELD = web.AppKey("held", asyncio.Event)
PEERS = web.AppKey("peers", set[int])
SLOW_CALLS = web.AppKey("slow_calls", list[str])


async def hold(request: web.Request) -> web.StreamResponse:
    """A watch-like stream: one line, then open until ``/release``."""
    response = web.StreamResponse()
    await response.prepare(request)
    await response.write(b'{"type": "ADDED"}\n')
    await asyncio.wait_for(request.app[HELD].wait(), 10)
    await response.write_eof()
    return response


async def release(request: web.Request) -> web.Response:
    request.app[HELD].set()
    return web.Response(text="released")


async def peer(request: web.Request) -> web.Response:
    """Remembers which client connection (its port) the request came on; answers how many
    connections it has seen so far."""
    assert request.transport is not None
    request.app[PEERS].add(request.transport.get_extra_info("peername")[1])
    await asyncio.sleep(0.01)
    return web.Response(text=str(len(request.app[PEERS])))


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, web.Application]]:
    """The test server's URL and its application (which records what it was asked)."""
    app = web.Application()
    app[HELD] = asyncio.Event()
    app[PEERS] = set()
    app[SLOW_CALLS] = []
    app.router.add_get("/hold", hold)
    app.router.add_get("/release", release)
    app.router.add_get("/peer", peer)
    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/lines", lines)
    app.router.add_get("/gzipped", gzipped)
    app.router.add_get("/slow", slow)
    app.router.add_get("/cut", cut)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        await runner.cleanup()


@pytest.fixture
def server(served: tuple[str, web.Application]) -> str:
    return served[0]


@pytest.fixture
async def http(server: str) -> AsyncIterator[httpx2.AsyncClient]:
    transport = AiohttpTransport(ssl.create_default_context())
    async with httpx2.AsyncClient(base_url=server, transport=transport, timeout=1.0) as client:
        yield client


async def test_a_request_arrives_as_sent_and_the_answer_comes_back(
    http: httpx2.AsyncClient,
) -> None:
    response = await http.post(
        "/echo?dryRun=All",
        json={"a": 1},
        headers={"Authorization": "Bearer t"},
    )
    assert response.status_code == 201
    assert response.headers["X-Seen"] == "yes"
    assert response.json() == {
        "method": "POST",
        "path": "/echo?dryRun=All",
        "authorization": "Bearer t",
        "content_type": "application/json",
        "body": '{"a":1}',
    }
    assert response.request.method == "POST"


async def test_a_body_streams_line_by_line(http: httpx2.AsyncClient) -> None:
    async with http.stream("GET", "/lines") as response:
        got = [line async for line in response.aiter_lines() if line]
    assert got == ['{"n": 0}', '{"n": 1}', '{"n": 2}']


async def test_a_compressed_body_is_decoded_once(http: httpx2.AsyncClient) -> None:
    response = await http.get("/gzipped")
    assert response.json() == {"zipped": True}


async def test_a_slow_answer_is_a_read_timeout(server: str) -> None:
    transport = AiohttpTransport(ssl.create_default_context())
    async with httpx2.AsyncClient(base_url=server, transport=transport, timeout=0.2) as client:
        with pytest.raises(httpx2.ReadTimeout):
            await client.get("/slow")


async def test_a_refused_connection_is_a_connect_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = AiohttpTransport(ssl.create_default_context())
    async with httpx2.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx2.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/")


async def test_a_body_cut_short_is_a_transport_error(http: httpx2.AsyncClient) -> None:
    with pytest.raises(httpx2.TransportError):
        await http.get("/cut")


async def test_a_closed_transport_refuses_requests_instead_of_opening_a_new_session(
    server: str,
) -> None:
    transport = AiohttpTransport(ssl.create_default_context())
    client = httpx2.AsyncClient(base_url=server, transport=transport)
    assert (await client.get("/echo")).status_code == 200
    await transport.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await client.get("/echo")
    await client.aclose()


async def test_a_read_cut_by_closing_the_client_is_not_retried_on_a_new_session(
    served: tuple[str, web.Application],
) -> None:
    server, app = served
    # A retried read used to reach the transport after the client had closed it, and opened a
    # session nobody would close again (an "Unclosed client session" at interpreter exit).
    retried: list[None] = []
    transport = RetryReads(
        AiohttpTransport(ssl.create_default_context()), on_retry=lambda: retried.append(None)
    )
    client = httpx2.AsyncClient(base_url=server, transport=transport, timeout=5.0)
    read = asyncio.ensure_future(client.get("/slow"))
    await asyncio.sleep(0.2)
    await client.aclose()
    with pytest.raises((httpx2.TransportError, RuntimeError)):
        await read
    await asyncio.sleep(0.3)  # past the first retry's delay
    assert (len(retried), app[SLOW_CALLS]) == (0, ["/slow"])


async def test_requests_share_the_capped_pool_and_watches_do_not_count_against_it(
    server: str,
) -> None:
    transport = AiohttpTransport(ssl.create_default_context(), limit=1)
    client = httpx2.AsyncClient(base_url=server, transport=transport, timeout=5.0)
    async with (
        asyncio.timeout(10),  # a watch waiting for the capped pool would wait for ever
        client,
        client.stream("GET", "/hold?watch=true") as first,
        client.stream("GET", "/hold?watch=1") as second,
    ):
        # Both watches are open at once, beyond the cap of 1 ...
        for watch in (first, second):
            assert await anext(watch.aiter_lines()) == '{"type": "ADDED"}'
        # ... and five requests at once still get through, all on the one connection.
        answers = await asyncio.gather(*(client.get("/peer") for _ in range(5)))
        assert [a.text for a in answers] == ["1"] * 5
        assert (await client.get("/release")).text == "released"


async def test_tls_connections_read_through_a_small_buffer_and_a_long_body_arrives_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """asyncio's 256 KiB read buffer per TLS connection, limited for the whole process (the
    class attribute is put back after the test); a body of 1 MiB still arrives byte for byte."""
    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", sslproto.SSLProtocol.max_size)
    reads: list[int] = []
    asked = sslproto.SSLProtocol.get_buffer

    def get_buffer(self: sslproto.SSLProtocol, n: int) -> memoryview:
        buffer = asked(self, n)
        reads.append(len(buffer))
        return buffer

    monkeypatch.setattr(sslproto.SSLProtocol, "get_buffer", get_buffer)
    limit_tls_read_buffers()
    body = bytes(range(256)) * 4096  # 1 MiB

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=body)

    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_tls)
    client_tls = ssl.create_default_context()
    ca.configure_trust(client_tls)
    app = web.Application()
    app.router.add_get("/big", big)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_tls).start()
    url = f"https://127.0.0.1:{runner.addresses[0][1]}/big"
    try:
        async with httpx2.AsyncClient(transport=AiohttpTransport(client_tls)) as client:
            answer = await client.get(url)
    finally:
        await runner.cleanup()
    assert answer.content == body
    assert reads, "the TLS connections read through SSLProtocol's buffer"
    assert max(reads) == TLS_READ_BUFFER
