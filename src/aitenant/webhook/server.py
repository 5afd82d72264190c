"""The HTTPS front end of the AITenant admission webhook (aiohttp).

It only moves bytes: read the request body (capped), hand it to ``review.review``, write the
JSON answer back, and log one line per denial or bad request. Every replica serves it, leader or
not; the TLS context comes from a ``runtime.tls.CertReloader``, so a rotated certificate is used
by new connections without restarting the server.

The port is reachable by more than the API server, and with ``failurePolicy: Fail`` a webhook
that stops answering refuses every AITenant write, the controller's own included. So no client
can hold the server (docs/design.md §5): each request must arrive whole within
``BODY_DEADLINE`` seconds of its headers, or its connection is dropped; at most
``CONCURRENT_BODIES`` bodies larger than ``SMALL_BODY`` are read at once (the others wait
inside that same deadline, their bytes left in the kernel), so the bodies held in memory stay
below ``CONCURRENT_BODIES`` times the cap plus ``MAX_CONNECTIONS`` times ``SMALL_BODY``; an
idle connection, or one that never completes its headers, is closed after
``KEEPALIVE_TIMEOUT``; a TLS handshake must finish within ``HANDSHAKE_TIMEOUT``; and past
``MAX_CONNECTIONS`` open connections a new one is closed at once.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from aitenant import contract
from aitenant.gateway_index import TenantsByGateway
from aitenant.runtime.serving.tls import CertReloader
from aitenant.webhook.access import GatewayAuthorizer
from aitenant.webhook.review import DEFAULT_MAX_BYTES, review
from aitenant.webhook.validators import WebhookPolicy

log = logging.getLogger(__name__)

_READ_CHUNK = 64 * 1024
# The API server sends a review in one go and gives up after the configuration's 10 s
# (manifests/webhook.yaml.j2): a body still incomplete after this long is a stalled client.
BODY_DEADLINE: Final = 5.0
# Bodies read at once: with the 4 MiB cap, 32 MiB of bodies (twice that while joined).
CONCURRENT_BODIES: Final = 8
READ_BUFSIZE: Final = 16 * 1024
# A body announced this small is read without a slot (an AITenant review is a few KiB).
SMALL_BODY: Final = 256 * 1024
# Idle time before a kept-alive connection is closed (aiohttp's default is an hour); aiohttp
# also starts it when a connection opens, so one that never completes a request goes too.
KEEPALIVE_TIMEOUT: Final = 15.0
HANDSHAKE_TIMEOUT: Final = 5.0
# Each open TLS connection costs about 0.8 MiB whatever it sends (asyncio's TLS buffers):
# this bounds them to about 200 MiB, and the descriptors well below any default limit.
MAX_CONNECTIONS: Final = 256


@dataclass(frozen=True)
class _WebhookState:
    policy: WebhookPolicy
    index: TenantsByGateway
    authorizer: GatewayAuthorizer
    max_bytes: int
    observe: Callable[[float], None] | None
    body_deadline: float
    # Binds to a loop on first use, so the app may be built off the loop that serves it.
    reading: asyncio.Semaphore


_STATE = web.AppKey("aitenant_webhook", _WebhookState)


async def _read_capped(request: web.Request, max_bytes: int) -> bytes | None:
    """The body, or None as soon as it is known to exceed ``max_bytes``."""
    length = request.content_length
    if length is not None and length > max_bytes:
        return None
    chunks: list[bytes] = []
    total = 0
    while chunk := await request.content.read(_READ_CHUNK):
        total += len(chunk)
        if total > max_bytes:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _log_outcome(request: web.Request, status: int, document: dict[str, Any]) -> None:
    peer = request.remote or "-"
    if status != 200:
        log.warning("bad admission request from %s: HTTP %d: %s", peer, status, document)
        return
    response = document.get("response")
    if not isinstance(response, dict) or response.get("allowed", False):
        return
    details = response.get("status") or {}
    code = details.get("code")
    level = logging.ERROR if isinstance(code, int) and code >= 500 else logging.INFO
    if code == 400:
        level = logging.WARNING
    log.log(
        level,
        "AITenant admission denied (uid %s, code %s): %s",
        response.get("uid"),
        code,
        details.get("message"),
    )


async def _read_in_time(request: web.Request, state: _WebhookState) -> bytes | None:
    """The capped body (None when over the cap), read while holding one of the reading slots;
    raises TimeoutError when it has not arrived whole within the deadline."""
    async with asyncio.timeout(state.body_deadline):
        length = request.content_length
        if length is not None and length <= SMALL_BODY:
            # A review the size the API server sends needs no slot: it never waits behind
            # clients that hold the slots until their deadline.
            return await _read_capped(request, state.max_bytes)
        async with state.reading:
            return await _read_capped(request, state.max_bytes)


def _drop(request: web.Request) -> None:
    """Close a stalled client's connection at once, without a TLS goodbye it would not read."""
    peer = request.remote or "-"
    log.warning(
        "admission request from %s not received within %.0f s: connection dropped",
        peer,
        request.app[_STATE].body_deadline,
    )
    if (transport := request.transport) is not None:
        transport.abort()


async def _handle(request: web.Request) -> web.StreamResponse:
    """Read the capped body, decide, time it, log a refusal."""
    state = request.app[_STATE]
    try:
        body = await _read_in_time(request, state)
    except TimeoutError:
        _drop(request)
        # Nobody reads it: the connection is gone, and aiohttp drops a response it cannot send.
        return web.Response(status=408)
    if body is None:
        document: dict[str, Any] = {
            "error": f"AdmissionReview body exceeds {state.max_bytes} bytes"
        }
        status = 413
    else:
        started = time.perf_counter()
        status, document = await review(
            body,
            policy=state.policy,
            index=state.index,
            authorizer=state.authorizer,
            max_bytes=state.max_bytes,
        )
        if state.observe is not None:
            state.observe(time.perf_counter() - started)
    _log_outcome(request, status, document)
    return web.json_response(document, status=status)


def admission_app(
    *,
    policy: WebhookPolicy,
    index: TenantsByGateway,
    authorizer: GatewayAuthorizer,
    max_bytes: int = DEFAULT_MAX_BYTES,
    observe: Callable[[float], None] | None = None,
    body_deadline: float = BODY_DEADLINE,
    concurrent_bodies: int = CONCURRENT_BODIES,
) -> web.Application:
    """The aiohttp application: ``POST <contract.WEBHOOK_PATH>`` answers AdmissionReviews
    about AITenants.

    ``observe`` receives the seconds spent deciding each review (parse, rules and the
    ``authorizer``'s SubjectAccessReview), for metrics.
    """
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")
    if body_deadline <= 0 or concurrent_bodies <= 0:
        raise ValueError("body_deadline and concurrent_bodies must be positive")
    # client_max_size guards request.read(); the handler streams with its own cap instead.
    app = web.Application(client_max_size=max_bytes)
    app[_STATE] = _WebhookState(
        policy=policy,
        index=index,
        authorizer=authorizer,
        max_bytes=max_bytes,
        observe=observe,
        body_deadline=body_deadline,
        reading=asyncio.Semaphore(concurrent_bodies),
    )
    app.router.add_post(contract.WEBHOOK_PATH, _handle)
    return app


class _GuardedSite(web.BaseSite):
    """A TCP site like aiohttp's ``TCPSite`` that also bounds the TLS handshake and the number
    of open connections (``TCPSite`` exposes neither)."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext,
        max_connections: int,
        handshake_timeout: float,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._host = host
        self._port = port
        self._max_connections = max_connections
        self._handshake_timeout = handshake_timeout
        self._tls = ssl_context

    @property
    def name(self) -> str:
        return f"https://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        limit = self._max_connections

        def protocol() -> asyncio.BaseProtocol:
            if len(server.connections) >= limit:
                return _Refused()
            return server()

        self._server = await asyncio.get_running_loop().create_server(
            protocol,
            self._host,
            self._port,
            ssl=self._tls,
            ssl_handshake_timeout=self._handshake_timeout,
        )


class _Refused(asyncio.Protocol):
    """A connection over the limit: closed as soon as it is made."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Debug only: under a flood, a line per connection would be the next resource to run out.
        log.debug("admission webhook at its connection limit: a new connection closed")
        if isinstance(transport, asyncio.Transport):
            transport.abort()
        else:
            transport.close()


async def serve(
    app: web.Application,
    *,
    host: str,
    port: int,
    reloader: CertReloader,
    max_connections: int = MAX_CONNECTIONS,
) -> web.AppRunner:
    """Serve ``app`` over HTTPS with the reloader's context; returns the started runner.

    ``port=0`` binds a free port (see ``runner.addresses``). The caller owns the reloader's
    start/stop and calls ``await runner.cleanup()`` to stop serving.
    """
    runner = web.AppRunner(
        app,
        access_log=None,
        shutdown_timeout=5.0,
        keepalive_timeout=KEEPALIVE_TIMEOUT,
        # A response is never followed by reading what a client still sends (aiohttp lingers
        # 10 s by default): a request that was not read whole ends its connection.
        lingering_time=0,
        # What a connection may buffer before its body is read: aiohttp pauses reading at twice
        # this (its default, 64 KiB, made 300 held connections cost 100 MiB more).
        read_bufsize=READ_BUFSIZE,
    )
    await runner.setup()
    try:
        site = _GuardedSite(
            runner,
            host,
            port,
            ssl_context=reloader.context,
            max_connections=max_connections,
            handshake_timeout=HANDSHAKE_TIMEOUT,
        )
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    for address in runner.addresses:
        log.info(
            "admission webhook listening on %s (AITenant path %s)", address, contract.WEBHOOK_PATH
        )
    return runner
