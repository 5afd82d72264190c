"""The HTTPS front end of the AITenant admission webhook (aiohttp).

It only moves bytes: read the request body (capped), hand it to ``validators.review``, write the
JSON answer back, and log one line per denial or bad request. Every replica serves it, leader or
not; the TLS context comes from a ``runtime.tls.CertReloader``, so a rotated certificate is used
by new connections without restarting the server.

    reloader = CertReloader(cert_dir)
    await reloader.start()
    runner = await serve(admission_app(policy=policy, index=index), host="0.0.0.0", port=9443,
                         reloader=reloader)
    ...
    await runner.cleanup()
    await reloader.stop()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from aitenant import contract
from aitenant.runtime.tls import CertReloader
from aitenant.webhook.validators import (
    DEFAULT_MAX_BYTES,
    GatewayIndex,
    WebhookPolicy,
    review,
)

log = logging.getLogger(__name__)

_READ_CHUNK = 64 * 1024


@dataclass(frozen=True)
class _WebhookState:
    policy: WebhookPolicy
    index: GatewayIndex
    max_bytes: int
    observe: Callable[[float], None] | None


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


async def _handle(request: web.Request) -> web.Response:
    """Read the capped body, decide, time it, log a refusal."""
    state = request.app[_STATE]
    body = await _read_capped(request, state.max_bytes)
    if body is None:
        document: dict[str, Any] = {
            "error": f"AdmissionReview body exceeds {state.max_bytes} bytes"
        }
        status = 413
    else:
        started = time.perf_counter()
        status, document = review(
            body, policy=state.policy, index=state.index, max_bytes=state.max_bytes
        )
        if state.observe is not None:
            state.observe(time.perf_counter() - started)
    _log_outcome(request, status, document)
    return web.json_response(document, status=status)


def admission_app(
    *,
    policy: WebhookPolicy,
    index: GatewayIndex,
    max_bytes: int = DEFAULT_MAX_BYTES,
    observe: Callable[[float], None] | None = None,
) -> web.Application:
    """The aiohttp application: ``POST <contract.WEBHOOK_PATH>`` answers AdmissionReviews
    about AITenants.

    ``observe`` receives the seconds spent deciding each review (parse + rules), for metrics.
    """
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")
    # client_max_size guards request.read(); the handler streams with its own cap instead.
    app = web.Application(client_max_size=max_bytes)
    app[_STATE] = _WebhookState(policy=policy, index=index, max_bytes=max_bytes, observe=observe)
    app.router.add_post(contract.WEBHOOK_PATH, _handle)
    return app


async def serve(
    app: web.Application, *, host: str, port: int, reloader: CertReloader
) -> web.AppRunner:
    """Serve ``app`` over HTTPS with the reloader's context; returns the started runner.

    ``port=0`` binds a free port (see ``runner.addresses``). The caller owns the reloader's
    start/stop and calls ``await runner.cleanup()`` to stop serving.
    """
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=reloader.context)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    for address in runner.addresses:
        log.info(
            "admission webhook listening on %s (AITenant path %s)", address, contract.WEBHOOK_PATH
        )
    return runner
