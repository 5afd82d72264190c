"""Leader election with a coordination.k8s.io/v1 Lease (client-go's protocol).

Only controllers and leader-only loops wait for leadership; informers, the webhook and the
HTTP servers run on every replica. Losing the Lease is fatal to the process (as in
controller-runtime): the caller exits and its supervisor restarts it as a standby.

A Lease held by another replica expires ``leaseDurationSeconds`` after this replica last saw its
record change, measured on this replica's monotonic clock; the holder's ``renewTime`` is never
compared with the local clock, so clocks that disagree between nodes cannot make two leaders
(client-go's leaderelection does the same). A standby that starts therefore waits a full lease
duration before taking a Lease whose holder has died.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable

from lightkube import ApiError, AsyncClient
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

log = logging.getLogger(__name__)


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class LeaderLost(Exception):
    """The Lease was lost or could not be renewed in time."""


_Record = tuple[object, ...]


def _record(spec: LeaseSpec | None) -> _Record | None:
    """The fields whose change shows that the holder is alive (client-go compares the same)."""
    if spec is None:
        return None
    return (
        spec.holderIdentity,
        spec.leaseDurationSeconds,
        spec.acquireTime,
        spec.renewTime,
        spec.leaseTransitions,
    )


class LeaderElector:
    def __init__(
        self,
        client: AsyncClient,
        *,
        name: str,
        namespace: str,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.now = now  # only written into the Lease, for people and other tools to read
        self.monotonic = monotonic  # what expiry is measured with
        self.is_leader = asyncio.Event()
        self._observed: _Record | None = None
        self._observed_at = 0.0

    def _spec(self, lease: Lease | None) -> LeaseSpec:
        now = self.now()
        spec = lease.spec if lease is not None else None
        holder = spec.holderIdentity if spec is not None else None
        same = holder == self.identity
        transitions = (spec.leaseTransitions or 0) if spec is not None else 0
        return LeaseSpec(
            holderIdentity=self.identity,
            leaseDurationSeconds=int(self.lease_duration),
            acquireTime=spec.acquireTime if same and spec is not None else now,
            renewTime=now,
            leaseTransitions=transitions if same else transitions + (1 if holder else 0),
        )

    def _observe(self, spec: LeaseSpec | None) -> None:
        """Remember when (locally) the record last changed."""
        record = _record(spec)
        if record != self._observed:
            self._observed = record
            self._observed_at = self.monotonic()

    def _expired(self, lease: Lease) -> bool:
        """Whether the Lease is free to take: nobody holds it, or its record has not changed for
        a lease duration of our own clock."""
        spec = lease.spec
        self._observe(spec)
        if spec is None or not spec.holderIdentity or spec.renewTime is None:
            return True
        duration = spec.leaseDurationSeconds or self.lease_duration
        return self.monotonic() > self._observed_at + duration

    async def try_acquire_or_renew(self) -> bool:
        try:
            lease = await self.client.get(Lease, self.name, namespace=self.namespace)
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            body = Lease(
                metadata=ObjectMeta(name=self.name, namespace=self.namespace),
                spec=self._spec(None),
            )
            try:
                await self.client.create(body)
            except ApiError as create_exc:
                if create_exc.status.code == 409:
                    return False
                raise
            self._observe(body.spec)
            return True
        spec = lease.spec
        if (
            spec
            and spec.holderIdentity not in (None, "", self.identity)
            and not self._expired(lease)
        ):
            return False
        lease.spec = self._spec(lease)
        try:
            await self.client.replace(lease)  # resourceVersion makes this compare-and-swap
        except ApiError as exc:
            if exc.status.code == 409:
                return False
            raise
        self._observe(lease.spec)
        return True

    async def acquire(self) -> None:
        """Block until this process holds the Lease."""
        while True:
            try:
                if await self.try_acquire_or_renew():
                    log.info(
                        "acquired leader lease %s/%s as %s",
                        self.namespace,
                        self.name,
                        self.identity,
                    )
                    self.is_leader.set()
                    return
            except Exception as exc:  # any failure to talk to the API: try again later
                log.warning("leader election: %r", exc)
            await asyncio.sleep(self.retry_period)

    async def hold(self) -> None:
        """Renew until cancelled; raise LeaderLost if renewal fails past the deadline."""
        loop = asyncio.get_running_loop()
        last_renew = loop.time()
        while True:
            await asyncio.sleep(self.retry_period)
            try:
                ok = await asyncio.wait_for(self.try_acquire_or_renew(), self.renew_deadline)
            except Exception as exc:  # counted against the renew deadline below
                log.warning("leader lease renewal failed: %r", exc)
                ok = False
            if ok:
                last_renew = loop.time()
            elif loop.time() - last_renew >= self.renew_deadline:
                self.is_leader.clear()
                raise LeaderLost(f"lost leader lease {self.namespace}/{self.name}")

    async def release(self) -> None:
        """Give the Lease up on shutdown so a standby takes over at once."""
        if not self.is_leader.is_set():
            return
        self.is_leader.clear()
        try:
            lease = await self.client.get(Lease, self.name, namespace=self.namespace)
            if lease.spec and lease.spec.holderIdentity == self.identity:
                lease.spec.holderIdentity = None
                lease.spec.renewTime = None
                lease.spec.acquireTime = None
                await self.client.replace(lease)
        except (ApiError, OSError) as exc:
            log.warning("could not release leader lease: %s", exc)
