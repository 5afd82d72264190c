"""Leader election and the Manager that runs the caches, the controllers and the leader-only
loops."""

from __future__ import annotations

import asyncio

from lightkube import AsyncClient

from aitenant import contract
from aitenant.app.aitenant_namespace import monitor_managed_namespace
from aitenant.app.controllers import Controllers
from aitenant.controllers.caches import Caches
from aitenant.runtime.control.leader import LeaderElector
from aitenant.runtime.control.manager import Manager, Runnable
from aitenant.runtime.serving.metrics import Metrics
from aitenant.settings import Settings


def build_manager(
    settings: Settings,
    client: AsyncClient,
    metrics: Metrics,
    caches: Caches,
    controllers: Controllers,
) -> Manager:
    leader_runnables: list[Runnable] = [
        lambda: mark_leader(metrics),
        lambda: monitor_managed_namespace(
            client,
            settings.aitenant_namespace,
            settings.subscription_namespace_maintain_interval,
        ),
    ]
    if controllers.bootstrap is not None:
        leader_runnables.append(controllers.bootstrap.run)
    manager = Manager(
        informers=caches.start_order(),
        required_informers=caches.required(),
        controllers=[controllers.aitenant, controllers.config],
        elector=leader_elector(settings, client),
        leader_runnables=leader_runnables,
    )
    metrics.track_caches(lambda: manager.informers)
    return manager


def leader_elector(settings: Settings, client: AsyncClient) -> LeaderElector | None:
    """The Lease election (``--leader-elect``); None: this replica always leads."""
    if not settings.leader_elect:
        return None
    return LeaderElector(
        client,
        name=contract.LEASE_NAME,
        namespace=settings.controller_namespace,
        lease_duration=settings.leader_elect_lease_duration,
        renew_deadline=settings.leader_elect_renew_deadline,
        retry_period=settings.leader_elect_retry_period,
    )


async def mark_leader(metrics: Metrics) -> None:
    """Runs only while this replica leads (or without leader election): the leader gauge."""
    metrics.is_leader.set(1)
    try:
        await asyncio.Event().wait()
    finally:
        metrics.is_leader.set(0)
