"""The process: settings from the command line, checks before anything starts, the App run
until SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from lightkube import AsyncClient

from aitenant import kubernetes_version
from aitenant.app.aitenant_namespace import NamespaceSetupError, ensure_managed_namespace
from aitenant.app.client import make_client
from aitenant.app.wiring import build_app
from aitenant.platform.discovery import http_fetch
from aitenant.runtime.client.transport import limit_tls_read_buffers
from aitenant.runtime.serving.metrics import Metrics
from aitenant.settings import Settings, SettingsError, load_settings

log = logging.getLogger("aitenant")


class UnsupportedServer(Exception):
    """The API server is older than the oldest Kubernetes we support."""


async def check_server_version(client: AsyncClient) -> None:
    """Refuse to start against an API server we do not support (README, "Supported
    Kubernetes"): one line naming the version found and the version needed."""
    info = await http_fetch(client)("/version")
    try:
        problem = kubernetes_version.unsupported_reason(info or {})
    except ValueError as exc:
        raise UnsupportedServer(str(exc)) from None
    if problem is not None:
        raise UnsupportedServer(problem)


def leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The failures inside ``group``, however deeply task groups nested them (a port already
    in use must be logged as that, not as "unhandled errors in a TaskGroup")."""
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


async def run(settings: Settings) -> int:
    metrics = Metrics()
    client = make_client(settings, metrics)
    try:
        await check_server_version(client)
        await ensure_managed_namespace(client, settings.aitenant_namespace)
    except (UnsupportedServer, NamespaceSetupError) as exc:
        log.error("%s", exc)
        await client.close()
        return 1
    app = build_app(settings, client, metrics)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, app.manager.stop)
    log.info(
        "starting: aitenant namespace %s, gateway namespace %s, infra namespace %s",
        settings.aitenant_namespace,
        settings.gateway_namespace,
        settings.effective_infra_namespace,
    )
    failures: list[BaseException] = []
    try:
        await app.manager.run()
    except* Exception as group:
        failures.extend(leaves(group))
    finally:
        await client.close()
    for exc in failures:
        log.error("stopping: %s", exc)
    log.info("stopped")
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> None:
    try:
        settings = load_settings(sys.argv[1:] if argv is None else argv, os.environ)
    except SettingsError as exc:
        print(f"aitenant-controller: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # httpx logs every request at info: thousands of lines per minute under load. Only at debug.
    if logging.getLogger().level > logging.DEBUG:
        logging.getLogger("httpx2").setLevel(logging.WARNING)
    # The webhook's thread waits for the interpreter lock at each step of a review; 1 ms
    # instead of 5 lets it in sooner while reconciles run (docs/design.md §9.7).
    sys.setswitchinterval(0.001)
    limit_tls_read_buffers()
    raise SystemExit(asyncio.run(run(settings)))
