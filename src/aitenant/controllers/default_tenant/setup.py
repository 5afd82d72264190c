"""The default-tenant bootstrap (a leader-only loop, not a controller): what wakes it.

Wakes on events of the objects it decides on: Config/default, the default AITenant and its
MaasTenantConfig (without the Config's informer, the latter two only). It waits for nothing of
its own: the manager starts it once the AITenants and MaasTenantConfigs have synced
(``Caches.required``).
"""

from __future__ import annotations

from lightkube import AsyncClient

from aitenant import contract
from aitenant.controllers.caches import Caches
from aitenant.controllers.default_tenant.bootstrap import DefaultTenantBootstrap
from aitenant.resources import Obj
from aitenant.runtime.cache.informer import EventType, Handler
from aitenant.settings import Settings


def setup(settings: Settings, client: AsyncClient, caches: Caches) -> DefaultTenantBootstrap:
    """The bootstrap and its event handlers (before the informers start)."""
    bootstrap = DefaultTenantBootstrap(client=client, settings=settings)
    wake_bootstrap(bootstrap, caches, settings)
    return bootstrap


def wake_bootstrap(bootstrap: DefaultTenantBootstrap, caches: Caches, settings: Settings) -> None:
    """Wake the default-tenant bootstrap on events of the objects it decides on: Config/default,
    the default AITenant and its MaasTenantConfig (without the Config's informer, the latter
    two only)."""

    def wake_on(namespace: str, name: str) -> Handler:
        def handler(event: EventType, old: Obj | None, new: Obj) -> None:
            meta = new["metadata"]
            if (meta.get("namespace") or "", meta["name"]) == (namespace, name):
                bootstrap.wake()

        return handler

    if caches.config_anchor is not None:
        caches.config_anchor.add_handler(wake_on("", contract.CONFIG_NAME))
    caches.tenants.add_handler(wake_on(settings.aitenant_namespace, contract.DEFAULT_TENANT_NAME))
    caches.configs.add_handler(
        wake_on(settings.maas_subscription_namespace, contract.TENANT_CONFIG_NAME)
    )
