"""MaasTenantConfig deletion: the tenant's cleanup, in the order of docs/contract.md §5.4
(``delete_maas_resources``, ``delete_platform``, ``remove_finalizer``).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from lightkube import ApiError, AsyncClient

from aitenant import contract, naming
from aitenant.controllers.aitenant.deletion import parse_time
from aitenant.controllers.finalizers import drop_finalizer
from aitenant.platform.apply import Applier
from aitenant.platform.prune import Tenant, TrackedObjects
from aitenant.resources import MaaSAuthPolicy, MaaSSubscription, MaasTenantConfig, Obj, labels_of
from aitenant.runtime.client.api_errors import is_not_found
from aitenant.runtime.client.requests import LIST_PAGE
from aitenant.runtime.control.controller import Done, Key, RequeueAfter, Result
from aitenant.settings import Settings

log = logging.getLogger(__name__)

REQUEUE_WAIT_FOR_CRS = 2.0


class ConfigCleanup:
    def __init__(
        self,
        *,
        client: AsyncClient,
        settings: Settings,
        applier: Applier,
        tracked: TrackedObjects,
        remember: Callable[[Obj], None],
        get_tenant: Callable[[str, str], Obj | None],
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.client = client
        self.remember = remember
        self.get_tenant = get_tenant
        self.now = now
        self.settings = settings
        self.applier = applier
        self.tracked = tracked

    async def __call__(self, key: Key, config: Obj) -> Result:
        if contract.TENANT_CONFIG_FINALIZER not in (config["metadata"].get("finalizers") or []):
            return Done()
        if await self.delete_maas_resources(key.namespace):
            if (why := self.gives_up_waiting(config)) is None:
                return RequeueAfter(REQUEUE_WAIT_FOR_CRS)
            log.warning(
                "maastenantconfig %s: MaaS objects still deleting, platform deleted anyway: %s",
                key,
                why,
            )
        if not await self.delete_platform(config):
            return RequeueAfter(REQUEUE_WAIT_FOR_CRS)
        await remove_finalizer(self.client, config, self.remember)
        self.tracked.forget(key)
        log.info("maastenantconfig %s: tenant cleanup finished", key)
        return Done()

    async def delete_maas_resources(self, namespace: str) -> bool:
        """Delete MaaSSubscriptions, then MaaSAuthPolicies; True while any still exist."""
        remaining = False
        for kind in (MaaSSubscription, MaaSAuthPolicy):
            try:
                # A tenant admin may create thousands: read them a page at a time.
                items = [
                    o
                    async for o in self.client.list(kind, namespace=namespace, chunk_size=LIST_PAGE)
                ]
            except ApiError as exc:
                if is_not_found(exc):  # the kind is not installed: nothing to clean
                    continue
                raise
            for item in items:
                remaining = True
                if item["metadata"].get("deletionTimestamp"):
                    continue
                try:
                    await self.client.delete(kind, item["metadata"]["name"], namespace=namespace)
                except ApiError as exc:
                    if not is_not_found(exc):
                        raise
        return remaining

    def gives_up_waiting(self, config: Obj) -> str | None:
        """Why the MaaS objects are no longer waited for, or None to keep waiting."""
        tenant = cleanup_identity(config, self.settings)
        if tenant is None:
            return "not a tenant's namespace"
        if self.get_tenant(self.settings.aitenant_namespace, tenant.name) is None:
            # Its deletion was forced (or it never existed): nothing waits for this cleanup,
            # and the platform must not outlive it.
            return f"AITenant {self.settings.aitenant_namespace}/{tenant.name} is gone"
        timeout = self.settings.deletion_timeout
        stamp = config["metadata"].get("deletionTimestamp")
        if timeout > 0 and stamp:
            deleting = (self.now() - parse_time(stamp)).total_seconds()
            if deleting >= timeout:
                return f"deleting for {deleting:.0f} s, beyond the deletion timeout"
        return None

    async def delete_platform(self, config: Obj) -> bool:
        """Every platform object carrying the tenant's tracking labels; True once all are gone.
        The tenant is the one the config's namespace belongs to (``cleanup_identity``), so what
        a tenant admin wrote on the config meanwhile cannot hide any of it."""
        tenant = cleanup_identity(config, self.settings)
        if tenant is None:
            return True  # not a tenant namespace: nothing was ever rendered for it
        # The gateway namespace holds some of the tenant's objects too (docs/contract.md §5.4).
        found = await self.tracked.find(tenant, self.settings.gateway_namespace)
        return await self.applier.delete_tracked(found)


def cleanup_identity(config: Obj, settings: Settings) -> Tenant | None:
    """The tenant whose platform a deleting config takes away: the AITenant its namespace
    belongs to (its owner may be gone by now). Only where two AITenants can map to one
    namespace (one named like --maas-subscription-namespace) does the tenant-name label choose
    between those two, never beyond them."""
    namespace = config["metadata"]["namespace"]
    names = naming.tenants_for_namespace(namespace, settings.maas_subscription_namespace)
    if not names:
        return None
    labelled = labels_of(config).get(contract.LABEL_TENANT_NAME)
    return Tenant(labelled if labelled in names else names[0], namespace)


async def remove_finalizer(
    client: AsyncClient, config: Obj, remember: Callable[[Obj], None]
) -> None:
    # The platform's deletions wake the config: remembered, the answer spares those passes.
    await drop_finalizer(
        client, MaasTenantConfig, config, contract.TENANT_CONFIG_FINALIZER, remember
    )
