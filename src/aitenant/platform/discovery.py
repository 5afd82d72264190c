"""Which resources the API server serves, from its discovery documents, cached briefly.

Used to tell whether the CRDs the platform needs (HTTPRoute, AuthPolicy, TokenRateLimitPolicy,
...) are installed, so a config can say ``DependencyMissing`` instead of failing on an apply. A
group/version that is served is remembered for ``ttl_served`` seconds; one that is not is asked
again after ``ttl_missing`` seconds, so a CRD installed later is noticed quickly. Passes that
ask for the same version while it is being fetched share that one request: a fresh process
reconciles many tenants at once, and each would otherwise fetch the same document.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient

from aitenant.platform.kinds import Kind
from aitenant.runtime.client.lightkube_private import http_client

# GET a discovery path ("/api/v1", "/apis/<group>/<version>"): the document, or None on 404.
Fetch = Callable[[str], Awaitable[dict[str, Any] | None]]


def discovery_path(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def http_fetch(client: AsyncClient) -> Fetch:
    """Discovery through the lightkube client's own connection (lightkube has no discovery API;
    its transport is httpx2). A failed request raises httpx2's error: like any unexpected
    failure, the reconcile is retried with backoff."""
    http = http_client(client)

    async def fetch(path: str) -> dict[str, Any] | None:
        response = await http.get(path)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return response.json()

    return fetch


@dataclass
class _SharedFetch:
    """One discovery request in flight and how many passes await it."""

    task: asyncio.Future[frozenset[str]]
    waiters: int = 0


class ApiDiscovery:
    def __init__(
        self,
        fetch: Fetch,
        *,
        ttl_served: float = 300.0,
        ttl_missing: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fetch = fetch
        self.ttl_served = ttl_served
        self.ttl_missing = ttl_missing
        self.clock = clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self._fetching: dict[str, _SharedFetch] = {}

    async def resources(self, api_version: str) -> frozenset[str]:
        """Plural names served under ``api_version`` (empty when the version is not served)."""
        now = self.clock()
        cached = self._cache.get(api_version)
        if cached is not None and now < cached[0]:
            return cached[1]
        fetch = self._fetching.get(api_version)
        if fetch is None or fetch.task.cancelled():
            fetch = self._fetching[api_version] = _SharedFetch(
                asyncio.ensure_future(self._fetch(api_version))
            )
            fetch.task.add_done_callback(functools.partial(self._fetched, api_version, fetch))
        fetch.waiters += 1
        try:
            # shield: one waiter being cancelled must not cancel the fetch the others wait for.
            return await asyncio.shield(fetch.task)
        finally:
            fetch.waiters -= 1
            if fetch.waiters == 0:
                # Nobody waits any more (the process is stopping, say): end the fetch rather
                # than let it run on after the client has closed. A no-op once it is done.
                fetch.task.cancel()

    def _fetched(self, api_version: str, fetch: _SharedFetch, _: object) -> None:
        if self._fetching.get(api_version) is fetch:
            del self._fetching[api_version]
        if not fetch.task.cancelled():
            fetch.task.exception()  # seen by the waiters; mark it retrieved should all have left

    async def _fetch(self, api_version: str) -> frozenset[str]:
        doc = await self.fetch(discovery_path(api_version))
        names = frozenset(
            r["name"] for r in (doc or {}).get("resources") or [] if "/" not in r.get("name", "/")
        )
        ttl = self.ttl_served if names else self.ttl_missing
        self._cache[api_version] = (self.clock() + ttl, names)
        return names

    async def serves(self, kind: Kind) -> bool:
        return kind.plural in await self.resources(kind.api_version)
