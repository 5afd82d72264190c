"""lightkube's requests sent through aiohttp's client instead of httpx's own connection pool.

lightkube speaks httpx2 and accepts any httpx2 transport. Its default one (httpcore on anyio)
spends about 2 ms of CPU per API request on this 2-core machine; aiohttp's C-accelerated client
about 0.6 ms (measured with 1,000 GETs of a namespace, 20 in flight). The controller makes
some 25 requests per new tenant and keeps a dozen watch streams open, so this is where most of
its CPU went under a burst of creates (docs/design.md §9.2).

The adapter is deliberately thin: the request lightkube built (URL, headers, body, timeouts) is
sent as it is, the answer comes back as an httpx2 response whose body streams from aiohttp
(watches read it line by line), and aiohttp's errors become httpx2's, so retries and error
handling above it see what they saw before.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx2

if TYPE_CHECKING:
    import aiohttp

# aiohttp computes these from the body it sends.
_HOP_HEADERS = frozenset({b"content-length", b"transfer-encoding"})
# asyncio gives every TLS connection a read buffer of SSLProtocol.max_size, 256 KiB, allocated
# and zeroed as it connects: with some 60 open (REQUEST_CONNECTIONS and a watch per informer)
# that was about 15 MB of the controller's memory. A TLS record holds at most 16 KiB of data,
# so 64 KiB reads cost a long list only a few more wake-ups (docs/design.md §9.5).
TLS_READ_BUFFER = 64 * 1024


def limit_tls_read_buffers() -> None:
    """Every TLS connection the process opens from now on (the API server's, the webhook's)
    reads through a buffer of TLS_READ_BUFFER: asyncio has no setting for it but this class
    attribute."""
    from asyncio import sslproto

    sslproto.SSLProtocol.max_size = TLS_READ_BUFFER


def _mapped(exc: BaseException, request: httpx2.Request) -> httpx2.TransportError | None:
    """The httpx2 error for an aiohttp (or socket) failure; None for anything else."""
    import aiohttp

    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx2.ConnectTimeout(message, request=request)
    if isinstance(exc, asyncio.TimeoutError):
        return httpx2.ReadTimeout(message, request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx2.ConnectError(message, request=request)
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return httpx2.RemoteProtocolError(message, request=request)
    if isinstance(exc, aiohttp.ClientError | OSError):
        return httpx2.ReadError(message, request=request)
    return None


class _Body(httpx2.AsyncByteStream):
    """An aiohttp response body read as it arrives; closing it releases the connection."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx2.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except Exception as exc:
            if (mapped := _mapped(exc, self._request)) is None:
                raise
            raise mapped from exc

    async def aclose(self) -> None:
        self._response.release()


# Connections for requests other than watches. Measured with 300 tenants created 20 at a time
# (docs/design.md §9.5): 100 allowed → 91 open and 115 MB; 32 → 52 open, 103 MB, and the
# tenants Active 5 % later; 16 → 98 MB but 27 % later.
REQUEST_CONNECTIONS = 32


def is_watch(request: httpx2.Request) -> bool:
    """A watch request (``?watch=true``), as opposed to a GET or LIST: it streams for minutes."""
    return request.url.params.get("watch") in ("true", "1")


class AiohttpTransport(httpx2.AsyncBaseTransport):
    """Sends httpx2 requests with aiohttp sessions, made on first use in the running loop.

    ``ssl_context`` is the cluster's (CA, client certificate). Bodies are passed through
    undecoded: httpx2 undoes any Content-Encoding as before.

    Watches and other requests use two sessions. A watch holds its connection for as long as it
    runs, so watches get as many as there are informers; other requests share at most
    ``limit`` connections and wait for a free one beyond that: each open TLS connection holds
    about 0.3 MB (asyncio's 256 KiB read buffer, OpenSSL's state), and a burst of creates kept
    some 70 of them open, which the API server, CPU-bound here, did not serve any faster.
    """

    def __init__(self, ssl_context: ssl.SSLContext, *, limit: int = REQUEST_CONNECTIONS) -> None:
        self._ssl = ssl_context
        self._limit = limit
        self._sessions: dict[bool, aiohttp.ClientSession] = {}
        self._closed = False

    def _open(self, watch: bool) -> aiohttp.ClientSession:
        import aiohttp

        if self._closed:
            # A request that began before the client closed (a retried read, say) must not open
            # a session that nobody would close again.
            raise RuntimeError("the API client's transport is closed")
        session = self._sessions.get(watch)
        if session is None:
            session = self._sessions[watch] = aiohttp.ClientSession(
                # 0: no cap; every watch needs a connection of its own.
                connector=aiohttp.TCPConnector(ssl=self._ssl, limit=0 if watch else self._limit),
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=("User-Agent", "Accept-Encoding"),
            )
        return session

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        import aiohttp

        session = self._open(is_watch(request))
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in request.headers.raw
            if name.lower() not in _HOP_HEADERS
        ]
        timeouts: dict[str, Any] = request.extensions.get("timeout", {})
        timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=timeouts.get("connect"),
            sock_read=timeouts.get("read"),
        )
        body = await request.aread()
        try:
            response = await session.request(
                request.method,
                str(request.url),
                headers=headers,
                data=body or None,
                timeout=timeout,
                allow_redirects=False,
            )
        except Exception as exc:
            if (mapped := _mapped(exc, request)) is None:
                raise
            raise mapped from exc
        return httpx2.Response(
            response.status,
            headers=[(k, v) for k, v in response.raw_headers],
            stream=_Body(response, request),
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        self._closed = True
        sessions = list(self._sessions.values())
        self._sessions.clear()
        for session in sessions:
            await session.close()
