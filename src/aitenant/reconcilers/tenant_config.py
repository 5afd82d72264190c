"""MaasTenantConfig reconciler: the ``tenant-cleanup`` finalizer (upstream-behaviour.md §5.4).

When an AITenant-managed config is deleted, every MaaSSubscription and MaaSAuthPolicy in its
namespace is deleted and awaited (their own finalizers tear down what they made), then the
tenant's platform resources (the ``PlatformCleanup`` seam; the platform reconciler plugs in
there), then the finalizer is removed. Scope follows ``--enable-tenant-namespace-discovery``:
without it only ``default-tenant`` in ``--maas-subscription-namespace`` is served, as upstream.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from aitenant import contract
from aitenant.errors import is_not_found
from aitenant.resources import MaaSAuthPolicy, MaaSSubscription, MaasTenantConfig, labels_of
from aitenant.runtime.controller import Key, Result
from aitenant.settings import Settings

log = logging.getLogger(__name__)

REQUEUE_WAIT_FOR_CRS = 2.0

# Deletes the tenant's platform objects; returns True once they are all gone.
PlatformCleanup = Callable[[dict[str, Any]], Awaitable[bool]]


async def no_platform(_: dict[str, Any]) -> bool:
    return True


def in_scope(config: dict[str, Any], settings: Settings) -> bool:
    meta = config["metadata"]
    if labels_of(config).get(contract.LABEL_MANAGED_BY_AITENANT) != "true":
        return False
    if settings.enable_tenant_namespace_discovery:
        return True
    return (
        meta.get("namespace") == settings.maas_subscription_namespace
        and meta.get("name") == contract.TENANT_CONFIG_NAME
    )


class TenantConfigReconciler:
    def __init__(
        self,
        *,
        client: AsyncClient,
        settings: Settings,
        get_config: Callable[[str, str], dict[str, Any] | None],
        cleanup_platform: PlatformCleanup = no_platform,
    ) -> None:
        self.client = client
        self.settings = settings
        self.get_config = get_config
        self.cleanup_platform = cleanup_platform

    async def reconcile(self, key: Key) -> Result:
        config = self.get_config(key.namespace, key.name)
        if config is None or not in_scope(config, self.settings):
            return Result()
        meta = config["metadata"]
        if not meta.get("deletionTimestamp"):
            return Result()
        if contract.TENANT_CONFIG_FINALIZER not in (meta.get("finalizers") or []):
            return Result()
        if await self.delete_maas_resources(key.namespace):
            return Result(requeue_after=REQUEUE_WAIT_FOR_CRS)
        if not await self.cleanup_platform(config):
            return Result(requeue_after=REQUEUE_WAIT_FOR_CRS)
        await self.remove_finalizer(config)
        log.info("maastenantconfig %s: tenant cleanup finished", key)
        return Result()

    async def delete_maas_resources(self, namespace: str) -> bool:
        """Delete MaaSSubscriptions, then MaaSAuthPolicies; True while any still exist."""
        remaining = False
        for kind in (MaaSSubscription, MaaSAuthPolicy):
            try:
                items = [o async for o in self.client.list(kind, namespace=namespace)]
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

    async def remove_finalizer(self, config: dict[str, Any]) -> None:
        meta = config["metadata"]
        remaining = [
            f for f in meta.get("finalizers") or [] if f != contract.TENANT_CONFIG_FINALIZER
        ]
        patch = {
            "metadata": {
                "finalizers": remaining or None,
                "resourceVersion": meta["resourceVersion"],
            }
        }
        try:
            await self.client.patch(
                MaasTenantConfig,
                meta["name"],
                patch,
                namespace=meta["namespace"],
                patch_type=PatchType.MERGE,
            )
        except ApiError as exc:
            if not is_not_found(exc):
                raise
