"""The load the side-by-side benchmark puts on a controller, and one watch that times it.

Every AITenant has a Gateway of its own name and carries
``maas.opendatahub.io/api-keys-revoked=true`` from its creation (no revocation Job or maas-api
runs here). ``Tenants`` records when each was first given a status, first Ready, and gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from devtools import peer, samples
from lightkube import AsyncClient

from aitenant import contract
from aitenant.resources import AITenant

IN_FLIGHT = 20


def tenant_body(name: str) -> dict[str, Any]:
    body = samples.aitenant(name, peer.AITENANT_NS)
    body["metadata"]["annotations"] = {contract.ANNOTATION_API_KEYS_REVOKED: "true"}
    return body


async def bounded(
    action: Callable[[str], Awaitable[object]], names: Iterable[str], limit: int | None
) -> None:
    """``action`` for each name, at most ``limit`` at a time (None: all at once)."""
    names = list(names)
    sem = asyncio.Semaphore(limit or max(1, len(names)))

    async def one(name: str) -> None:
        async with sem:
            await action(name)

    await asyncio.gather(*(one(n) for n in names))


async def create_gateways(client: AsyncClient, names: Iterable[str]) -> None:
    async def one(name: str) -> None:
        await samples.create_gateway(client, samples.gateway(name, peer.GATEWAY_NS))

    await bounded(one, names, IN_FLIGHT)


async def create_tenants(client: AsyncClient, names: Iterable[str], limit: int | None) -> None:
    async def one(name: str) -> None:
        await samples.create_aitenant(client, tenant_body(name))

    await bounded(one, names, limit)


async def delete_tenants(client: AsyncClient, names: Iterable[str]) -> None:
    async def one(name: str) -> None:
        await client.delete(AITenant, name, namespace=peer.AITENANT_NS)

    await bounded(one, names, None)


def deadline_for(count: int) -> float:
    """A generous timeout for ``count`` tenants to change state (the figures, not this, are
    what the benchmark is about)."""
    return 120 + 10 * count


@dataclass
class Tenants:
    """When each AITenant was first given a status, first Ready, and gone (``time.time()``),
    from one watch (started again if it breaks: a CRD replaced by the peer's may end it)."""

    client: AsyncClient
    status_at: dict[str, float] = field(default_factory=dict)
    ready_at: dict[str, float] = field(default_factory=dict)
    gone_at: dict[str, float] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    restarts: int = 0

    async def run(self) -> None:
        while True:
            try:
                async for kind, obj in self.client.watch(AITenant, namespace=peer.AITENANT_NS):
                    self.observe(kind, obj)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.restarts += 1
                await asyncio.sleep(0.2)
                # Whatever went while the watch was down is gone.
                present = {
                    o["metadata"]["name"]
                    async for o in self.client.list(AITenant, namespace=peer.AITENANT_NS)
                }
                for name in set(self.status_at) - present:
                    self.gone_at.setdefault(name, time.time())

    def observe(self, kind: str, obj: Any) -> None:
        now = time.time()
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self.gone_at.setdefault(name, now)
        else:
            status = obj.get("status") or {}
            if status:
                self.status_at.setdefault(name, now)
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or []
            ):
                self.ready_at.setdefault(name, now)
        self.changed.set()

    async def until(
        self,
        state: str,
        names: Collection[str],
        timeout: float,
        check: Callable[[], None] = lambda: None,
    ) -> None:
        """Until every one of ``names`` reached ``state`` (status, ready, gone); ``check``
        (raising to give up) at least once a second."""
        seen = {"status": self.status_at, "ready": self.ready_at, "gone": self.gone_at}[state]
        deadline = time.monotonic() + timeout
        while missing := [n for n in names if n not in seen]:
            check()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"{len(missing)} of {len(names)} tenants not {state} after {timeout:.0f} s,"
                    f" e.g. {sorted(missing)[:3]} (the watch broke {self.restarts} times)"
                )
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))
