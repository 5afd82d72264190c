"""API discovery: whether the CRDs the platform needs are served."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest

from aitenant.platform import kinds
from aitenant.platform.discovery import ApiDiscovery, discovery_path, http_fetch

from ..scripted_api import ScriptedApi, ok, status


class FakeServer:
    """Discovery documents by path, a request log, and a clock the test moves."""

    def __init__(self, served: dict[str, list[str]]) -> None:
        self.served = served
        self.requests: list[str] = []
        self.time = 0.0

    async def fetch(self, path: str) -> dict[str, Any] | None:
        self.requests.append(path)
        names = self.served.get(path)
        if names is None:
            return None
        return {"resources": [{"name": n} for n in names]}

    def discovery(self) -> ApiDiscovery:
        return ApiDiscovery(self.fetch, ttl_served=300, ttl_missing=10, clock=lambda: self.time)


def test_paths() -> None:
    assert discovery_path("v1") == "/api/v1"
    assert discovery_path("batch/v1") == "/apis/batch/v1"


async def test_subresources_do_not_count_as_served_kinds() -> None:
    server = FakeServer({"/apis/batch/v1": ["cronjobs/status"]})
    assert not await server.discovery().serves(kinds.CRONJOB)


async def test_served_versions_are_cached_and_missing_ones_asked_again_soon() -> None:
    server = FakeServer({"/apis/gateway.networking.k8s.io/v1": ["gateways", "httproutes"]})
    discovery = server.discovery()
    assert await discovery.serves(kinds.HTTP_ROUTE)
    assert not await discovery.serves(kinds.AUTH_POLICY)
    assert await discovery.serves(kinds.HTTP_ROUTE)
    assert not await discovery.serves(kinds.AUTH_POLICY)
    assert len(server.requests) == 2
    # The AuthPolicy CRD gets installed; noticed once the short negative TTL passes.
    server.served["/apis/kuadrant.io/v1"] = ["authpolicies"]
    server.time = 11
    assert await discovery.serves(kinds.AUTH_POLICY)
    assert await discovery.serves(kinds.HTTP_ROUTE)
    assert server.requests == [
        "/apis/gateway.networking.k8s.io/v1",
        "/apis/kuadrant.io/v1",
        "/apis/kuadrant.io/v1",
    ]
    server.time = 301
    assert await discovery.serves(kinds.HTTP_ROUTE)
    assert server.requests[-1] == "/apis/gateway.networking.k8s.io/v1"


async def test_http_fetch_answers_documents_none_for_404_and_raises_on_other_answers() -> None:
    api = ScriptedApi().on("GET", "/apis/batch/v1", ok({"resources": [{"name": "cronjobs"}]}))
    api.on("GET", "/apis/example.com/v1", status(503, "ServiceUnavailable"))
    fetch = http_fetch(api.client())
    assert await fetch("/apis/batch/v1") == {"resources": [{"name": "cronjobs"}]}
    assert await fetch("/apis/gateway.networking.k8s.io/v1") is None
    with pytest.raises(httpx2.HTTPStatusError, match="503"):
        await fetch("/apis/example.com/v1")


async def test_passes_asking_at_once_share_one_request() -> None:
    server = FakeServer({"/apis/batch/v1": ["jobs", "cronjobs"]})
    release = asyncio.Event()
    plain_fetch = server.fetch

    async def slow_fetch(path: str) -> dict[str, Any] | None:
        await release.wait()
        return await plain_fetch(path)

    discovery = ApiDiscovery(slow_fetch)
    waiters = [asyncio.ensure_future(discovery.serves(kinds.CRONJOB)) for _ in range(5)]
    await asyncio.sleep(0)
    waiters[0].cancel()  # one pass giving up must not fail the others
    release.set()
    assert await asyncio.gather(*waiters[1:]) == [True] * 4
    assert server.requests == ["/apis/batch/v1"]


async def test_a_failed_fetch_reaches_every_waiter_and_the_next_pass_asks_again() -> None:
    calls = 0

    async def failing_once(path: str) -> dict[str, Any] | None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        if calls == 1:
            raise httpx2.ConnectError("refused")
        return {"resources": [{"name": "cronjobs"}]}

    discovery = ApiDiscovery(failing_once)
    outcomes = await asyncio.gather(
        *(discovery.serves(kinds.CRONJOB) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(o, httpx2.ConnectError) for o in outcomes)
    assert await discovery.serves(kinds.CRONJOB)
    assert calls == 2


async def test_a_fetch_nobody_awaits_any_more_is_cancelled_and_the_next_pass_asks_again() -> None:
    # A stopping process cancels its passes; their fetch must not run on after the client closes.
    started: list[str] = []
    cancelled: list[str] = []
    release = asyncio.Event()

    async def held_fetch(path: str) -> dict[str, Any] | None:
        started.append(path)
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append(path)
            raise
        return {"resources": [{"name": "cronjobs"}]}

    discovery = ApiDiscovery(held_fetch)
    waiters = [asyncio.ensure_future(discovery.serves(kinds.CRONJOB)) for _ in range(2)]
    await asyncio.sleep(0)
    for waiter in waiters:
        waiter.cancel()
    await asyncio.gather(*waiters, return_exceptions=True)
    await asyncio.sleep(0)
    assert cancelled == ["/apis/batch/v1"]
    release.set()
    assert await discovery.serves(kinds.CRONJOB)
    assert started == ["/apis/batch/v1", "/apis/batch/v1"]
