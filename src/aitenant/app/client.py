"""The lightkube client every part shares: aiohttp underneath, reads retried, requests counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightkube import AsyncClient, KubeConfig
from lightkube.config.client_adapter import verify_cluster
from lightkube.core.exceptions import ConfigError

from aitenant import contract
from aitenant.runtime.client.lightkube_private import http_client
from aitenant.runtime.client.retry import RetryReads
from aitenant.runtime.client.transport import AiohttpTransport, is_watch
from aitenant.runtime.serving.metrics import Metrics
from aitenant.settings import Settings


def make_client(settings: Settings, metrics: Metrics) -> AsyncClient:
    return connect(settings.kubeconfig, contract.CONTROLLER_NAME, metrics)


def connect(kubeconfig: str | Path | None, field_manager: str, metrics: Metrics) -> AsyncClient:
    """A lightkube client for ``kubeconfig`` (None: in-cluster, or ``$KUBECONFIG``) whose
    requests go through aiohttp (``runtime.transport``), retry transient answers to reads
    (``runtime.retry``) and are counted by verb and code."""
    config = (KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()).get()
    if config is None or config.user is None:
        raise ConfigError("the kubeconfig has no current context with a user")
    tls = verify_cluster(config.cluster, config.user, config.abs_file)
    transport = RetryReads(AiohttpTransport(tls), on_retry=metrics.api_read_retries.inc)
    client = AsyncClient(config, field_manager=field_manager, transport=transport)
    count_requests(client, metrics)
    return client


def count_requests(client: AsyncClient, metrics: Metrics) -> None:
    """Count every API request by verb and code (lightkube exposes no hook, httpx does)."""

    async def on_response(response: Any) -> None:
        request = response.request
        verb = {
            "POST": "CREATE",
            "PUT": "UPDATE",
            "PATCH": "PATCH",
            "DELETE": "DELETE",
        }.get(request.method)
        if verb is None:
            verb = "WATCH" if is_watch(request) else "GET"
        metrics.api_requests.labels(verb, str(response.status_code)).inc()

    http_client(client).event_hooks["response"].append(on_response)
