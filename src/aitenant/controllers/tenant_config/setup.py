"""The MaasTenantConfig controller: what it waits for and what wakes it (docs/contract.md §3.6).

Waits for the AITenants, the MaasTenantConfigs, the maas-api database Secret and the platform's
informers of built-in kinds. Wakes on:

- a config it serves or must strip a leftover finalizer from (``scope.wanted``), on any change
  but a status-only one (``config_changed``), unless someone else wrote that status
  (``status_overwritten``);
- the owning AITenant deleted or its status.gatewayRef changed (``platform_context_changed``);
- that AITenant's Gateway created or deleted (the ``gateway`` index,
  ``aitenant.gateway_index``);
- any of its platform objects, by their tracking labels (``tracked_config_key``);
- the database Secret every maas-api reads (every config in scope, at low priority).

An AITenant's config is found by its tenant namespace (``config_key_of_tenant``).
"""

from __future__ import annotations

from lightkube import AsyncClient

from aitenant import contract, naming
from aitenant.controllers.caches import Caches
from aitenant.controllers.predicates import can_wait, status_overwritten
from aitenant.controllers.tenant_config.cleanup import ConfigCleanup
from aitenant.controllers.tenant_config.reconciler import TenantConfigReconciler
from aitenant.controllers.tenant_config.scope import in_scope, wanted
from aitenant.platform.apply import Applier, tenant_of
from aitenant.platform.discovery import ApiDiscovery, http_fetch
from aitenant.platform.prune import TrackedObjects
from aitenant.resources import Obj
from aitenant.runtime.cache.informer import EventType
from aitenant.runtime.control.controller import Controller, Key
from aitenant.runtime.serving.metrics import Metrics
from aitenant.settings import Settings


def setup(settings: Settings, client: AsyncClient, metrics: Metrics, caches: Caches) -> Controller:
    """The MaasTenantConfig controller and its event handlers (before the informers start)."""
    controller = Controller(
        "maastenantconfig",
        reconciler(settings, client, caches).reconcile,
        metrics=metrics,
        workers=settings.workers,
        # The caches a pass reads that sync on any cluster; the Gateway's and the platform's
        # CRDs may be missing, and a pass reads those from the API until their informers sync.
        caches=[
            caches.tenants,
            caches.configs,
            caches.db_secret,
            *caches.platform.built_in_informers,
        ],
    )
    requeue_configs(controller, caches, settings)
    return controller


def reconciler(settings: Settings, client: AsyncClient, caches: Caches) -> TenantConfigReconciler:
    applier = Applier(client)
    tracked = TrackedObjects(
        applier, caches.platform, infra_namespace=settings.effective_infra_namespace
    )
    cleanup = ConfigCleanup(
        client=client,
        settings=settings,
        applier=applier,
        tracked=tracked,
        remember=caches.configs.remember,
        get_tenant=caches.tenants.get,
    )
    return TenantConfigReconciler(
        client=client,
        settings=settings,
        get_config=caches.configs.get,
        remember=caches.configs.remember,
        get_tenant=caches.tenants.get,
        reads=caches.reads,
        discovery=ApiDiscovery(http_fetch(client)),
        cache=caches.platform,
        applier=applier,
        tracked=tracked,
        cleanup=cleanup,
    )


# -- predicates ------------------------------------------------------------------------------
def config_changed(old: Obj | None, new: Obj) -> bool:
    """Config predicate: anything but a status-only update (our own writes land there)."""
    if old is None:
        return True
    old_meta, new_meta = old["metadata"], new["metadata"]
    return (
        old_meta.get("generation") != new_meta.get("generation")
        or old_meta.get("labels") != new_meta.get("labels")
        or old_meta.get("annotations") != new_meta.get("annotations")
        or old_meta.get("finalizers") != new_meta.get("finalizers")
        or old_meta.get("deletionTimestamp") != new_meta.get("deletionTimestamp")
    )


def config_key_for(tenant_namespace: str) -> Key:
    """The key of the config an AITenant owns in its tenant namespace."""
    return Key(tenant_namespace, contract.TENANT_CONFIG_NAME)


def config_key_of_tenant(tenant: Obj, settings: Settings) -> Key:
    """The key of an AITenant's config: ``default-tenant`` in its tenant namespace (the one its
    status records, else the one its name derives)."""
    namespace = (tenant.get("status") or {}).get("tenantNamespace") or naming.tenant_namespace_for(
        tenant["metadata"]["name"], settings.maas_subscription_namespace
    )
    return config_key_for(namespace)


def platform_context_changed(old: Obj | None, new: Obj) -> bool:
    """An AITenant change the platform renders from: status.gatewayRef. (spec.oidc is read
    by the MaaSAuthPolicy controller for the Gateway AuthPolicy, not by the platform.)"""
    if old is None:
        return True
    return (old.get("status") or {}).get("gatewayRef") != (new.get("status") or {}).get(
        "gatewayRef"
    )


def tracked_config_key(obj: Obj) -> Key | None:
    """The config that rendered a platform object, from its tracking labels."""
    owner = tenant_of(obj)
    if not owner or not all(owner):
        return None
    return config_key_for(owner[1])


# -- handlers: informer events → queued keys (no I/O) ----------------------------------------
def requeue_configs(controller: Controller, caches: Caches, settings: Settings) -> None:
    """Queue a MaasTenantConfig when it changes (``wanted``, ``config_changed``; a status only
    when someone else wrote it, ``status_overwritten``) and when what
    its platform is rendered from does: the owning AITenant's status.gatewayRef, its Gateway
    appearing or going, any of its platform objects (the Deployment turning Available, a
    user's edit, a deletion), and the database Secret every maas-api reads. An AITenant's
    config is found by its tenant namespace (``config_key_of_tenant``)."""

    def enqueue_config_of(tenant: Obj | None) -> None:
        if tenant is None:
            return
        key = config_key_of_tenant(tenant, settings)
        config = caches.configs.get(key.namespace, key.name)
        if config is not None and in_scope(config, settings):
            controller.enqueue(key)

    def on_config(event: EventType, old: Obj | None, new: Obj) -> None:
        if wanted(new, settings) and (
            event == "DELETED"
            or config_changed(old, new)
            or status_overwritten(event, old, new, ours=caches.configs.ours(new))
        ):
            meta = new["metadata"]
            controller.enqueue(
                Key(meta["namespace"], meta["name"]), low_priority=can_wait(event, new)
            )

    def on_tenant(event: EventType, old: Obj | None, new: Obj) -> None:
        if event == "DELETED" or platform_context_changed(old, new):
            enqueue_config_of(new)

    def on_gateway(event: EventType, old: Obj | None, new: Obj) -> None:
        if event == "MODIFIED":
            return  # the platform needs the Gateway to exist, nothing more
        meta = new["metadata"]
        for namespace, name in caches.by_gateway.tenants_for_gateway(
            meta["namespace"], meta["name"]
        ):
            enqueue_config_of(caches.tenants.get(namespace, name))

    def on_platform_object(event: EventType, old: Obj | None, new: Obj) -> None:
        if (key := tracked_config_key(new)) is not None:
            controller.enqueue(key)

    def on_db_secret(event: EventType, old: Obj | None, new: Obj) -> None:
        # Every tenant's maas-api reads it: one that waited for it goes on at once.
        for config in caches.configs.list():
            if in_scope(config, settings):
                meta = config["metadata"]
                controller.enqueue(Key(meta["namespace"], meta["name"]), low_priority=True)

    caches.configs.add_handler(on_config)
    caches.db_secret.add_handler(on_db_secret)
    caches.tenants.add_handler(on_tenant)
    caches.gateways.add_handler(on_gateway)
    caches.platform.add_handler(on_platform_object)
