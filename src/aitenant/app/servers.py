"""The HTTP servers: health and metrics on the process's loop, the admission webhook on a
thread of its own. Each imports its web framework when it starts, not at import time."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aitenant.gateway_index import TenantsByGateway
from aitenant.runtime.serving.metrics import Metrics
from aitenant.runtime.serving.server_thread import Server, ServerThread
from aitenant.settings import Settings

if TYPE_CHECKING:
    from aiohttp import web

    from aitenant.runtime.serving.http import ReadyCheck

StartServer = Callable[[], Awaitable[Server]]


def build_servers(
    settings: Settings, metrics: Metrics, *, ready: ReadyCheck, index: TenantsByGateway
) -> list[StartServer]:
    """The servers the settings ask for (a port of 0 turns one off; the webhook also needs its
    certificate directory)."""
    checks: list[ReadyCheck] = [ready]
    # Filled as the servers that can die on their own start (the webhook's thread).
    live: list[ReadyCheck] = []

    async def start_health() -> web.AppRunner:
        http = await import_off_loop("aitenant.runtime.serving.http")
        served = http.health_app(checks, live)
        return await http.serve(served, settings.bind_address, settings.health_port)

    async def start_metrics() -> web.AppRunner:
        http = await import_off_loop("aitenant.runtime.serving.http")
        served = http.metrics_app(metrics)
        return await http.serve(served, settings.bind_address, settings.metrics_port)

    servers: list[StartServer] = []
    if settings.health_port:
        servers.append(start_health)
    if settings.metrics_port:
        servers.append(start_metrics)
    if settings.webhook_port and settings.webhook_cert_dir:

        async def start_watched_webhook() -> ServerThread:
            thread = await start_webhook(settings, metrics, index)
            live.append(thread.problem)
            return thread

        servers.append(start_watched_webhook)
    return servers


async def import_off_loop(module: str) -> Any:
    """Import ``module`` in a worker thread: the HTTP servers' web framework takes a while to
    import, and the informers and the first reconciles go on meanwhile."""
    return await asyncio.to_thread(importlib.import_module, module)


async def start_webhook(
    settings: Settings, metrics: Metrics, index: TenantsByGateway
) -> ServerThread:
    """The HTTPS admission webhook, on an event loop and thread of its own so that a review never
    waits behind a reconcile (docs/design.md §9.7). Its certificate is reloaded in place when the
    files change."""
    return await ServerThread.start(
        "admission-webhook", lambda: serve_webhook(settings, metrics, index)
    )


async def serve_webhook(
    settings: Settings, metrics: Metrics, index: TenantsByGateway
) -> web.AppRunner:
    """Runs on the webhook's own loop: importing the web framework there holds up nothing."""
    assert settings.webhook_cert_dir is not None
    from aitenant.app.client import make_client
    from aitenant.runtime.serving.tls import CertReloader
    from aitenant.webhook import server as webhook_server
    from aitenant.webhook.sar import ApiAuthorizer, own_username
    from aitenant.webhook.validators import WebhookPolicy

    reloader = CertReloader(settings.webhook_cert_dir)
    # A client of this loop's own: the process's client belongs to the main loop (its sessions
    # are made there). It asks the SubjectAccessReviews (docs/differences.md D34).
    client = make_client(settings, metrics)
    policy = WebhookPolicy(
        aitenant_namespace=settings.aitenant_namespace,
        gateway_namespace=settings.gateway_namespace,
        default_gateway_name=settings.gateway_name,
        controller_username=await own_username(client),
    )
    webhook = webhook_server.admission_app(
        policy=policy,
        index=index,
        authorizer=ApiAuthorizer(client),
        observe=metrics.webhook_seconds.observe,
    )

    async def stop_reloader(_: web.Application) -> None:
        await reloader.stop()
        await client.close()

    webhook.on_cleanup.append(stop_reloader)
    await reloader.start()
    return await webhook_server.serve(
        webhook, host=settings.bind_address, port=settings.webhook_port, reloader=reloader
    )
