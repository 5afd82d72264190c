"""The AITenant controller: what it waits for, its index, and what wakes it (docs/contract.md
§3.3).

Waits for the AITenants, the MaasTenantConfigs, the Gateway claims, the tenant Roles, the
Namespaces and the legacy Tenants. Wakes on:

- an AITenant created, deleted, given a new generation or a deletionTimestamp
  (``tenant_changed``), or its status written by someone else (``status_overwritten``);
- any change of its ``default-tenant`` MaasTenantConfig, found by namespace
  (``owners_of_config``);
- one of its Roles changed or deleted (owner annotations, ``annotated_owner``);
- its Gateway created, deleted or given a new generation, and the claim on its Gateway deleted
  (the AITenant informer's ``gateway`` index, ``aitenant.gateway_index``);
- a key revocation that ends (``Revocations.wake``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightkube import AsyncClient

from aitenant import contract, naming
from aitenant.controllers.aitenant.deletion import TenantFinalizer
from aitenant.controllers.aitenant.gateway_claim import CLAIM_OWNER_INDEX, claim_owner_names
from aitenant.controllers.aitenant.reconciler import AITenantReconciler
from aitenant.controllers.aitenant.revocation import KeyRevoker, Revocations
from aitenant.controllers.aitenant.stale_keys import StaleKeys
from aitenant.controllers.caches import Caches
from aitenant.controllers.predicates import can_wait, status_overwritten
from aitenant.resources import Obj, annotations_of
from aitenant.runtime.cache.informer import EventType
from aitenant.runtime.client.events import EventRecorder
from aitenant.runtime.control.controller import Controller, Key
from aitenant.runtime.serving.metrics import Metrics
from aitenant.settings import Settings

if TYPE_CHECKING:
    import httpx


def revocation_transport(
    settings: Settings, client: AsyncClient
) -> httpx.AsyncBaseTransport | None:
    """The ClusterIP transport when asked for (``--maas-api-via-cluster-ip``), else httpx's own.
    Imported only then: httpx is not loaded at process start (revocation.py)."""
    if not settings.maas_api_via_cluster_ip:
        return None
    from aitenant.controllers.aitenant.service_ip import ServiceIPTransport

    return ServiceIPTransport(client, settings.maas_api_ca_file)


def setup(settings: Settings, client: AsyncClient, metrics: Metrics, caches: Caches) -> Controller:
    """The AITenant controller, its claim index and its event handlers (before the informers
    start)."""
    revocations = Revocations(
        KeyRevoker(
            ca_file=settings.maas_api_ca_file, transport=revocation_transport(settings, client)
        )
    )
    controller = Controller(
        "aitenant",
        reconciler(settings, client, caches, revocations).reconcile,
        metrics=metrics,
        workers=settings.workers,
        # The caches a pass reads that sync on any cluster; the Gateways may have no CRD, and a
        # pass reads them from the API until their informer has synced.
        caches=[
            caches.tenants,
            caches.configs,
            caches.claims,
            caches.roles,
            caches.namespaces,
            caches.legacy_tenants,
        ],
    )
    # A revocation that ends wakes its tenant (it ran outside the workers).
    revocations.wake = lambda namespace, name: controller.enqueue(Key(namespace, name))
    caches.claims.add_index(CLAIM_OWNER_INDEX, claim_owner_names)
    requeue_aitenants(controller, caches, settings)
    return controller


def reconciler(
    settings: Settings, client: AsyncClient, caches: Caches, revocations: Revocations
) -> AITenantReconciler:
    events = EventRecorder(client, component=contract.EVENT_SOURCE)
    finalizer = TenantFinalizer(
        client=client,
        settings=settings,
        events=events,
        revocations=revocations,
        reads=caches.reads,
        platform=caches.platform,
    )
    return AITenantReconciler(
        client=client,
        settings=settings,
        events=events,
        get_tenant=caches.tenants.get,
        remember=caches.tenants.remember,
        reads=caches.reads,
        finalize=finalizer,
        stale_keys=StaleKeys(revocations=revocations, settings=settings),
    )


# -- predicates ------------------------------------------------------------------------------
def tenant_changed(event: EventType, old: Obj | None, new: Obj) -> bool:
    """AITenant predicate: create, delete, generation change, deletionTimestamp newly set."""
    if event != "MODIFIED" or old is None:
        return True
    old_meta, new_meta = old["metadata"], new["metadata"]
    return old_meta.get("generation") != new_meta.get("generation") or (
        bool(new_meta.get("deletionTimestamp")) and not old_meta.get("deletionTimestamp")
    )


def annotated_owner(obj: Obj) -> Key | None:
    """The AITenant named by an object's owner annotations (configs, Roles)."""
    ann = annotations_of(obj)
    name = ann.get(contract.ANNOTATION_AITENANT_NAME)
    namespace = ann.get(contract.ANNOTATION_AITENANT_NAMESPACE)
    return Key(namespace, name) if name and namespace else None


def owners_of_config(config: Obj, settings: Settings) -> list[Key]:
    """The AITenants a config's namespace can belong to (``naming.tenants_for_namespace``):
    never the ones its annotations name, which its tenant admin may write."""
    meta = config["metadata"]
    if meta.get("name") != contract.TENANT_CONFIG_NAME:
        return []
    names = naming.tenants_for_namespace(meta["namespace"], settings.maas_subscription_namespace)
    return [Key(settings.aitenant_namespace, name) for name in names]


# -- handlers: informer events → queued keys (no I/O) ----------------------------------------
def requeue_aitenants(controller: Controller, caches: Caches, settings: Settings) -> None:
    """Queue an AITenant when it changes (``tenant_changed``) or someone else writes its status
    (``status_overwritten``), when its config or one of its Roles does (their owner
    annotations), when its Gateway is created, deleted or given a new generation, and when the
    claim on its Gateway goes (a tenant refused because another one held the Gateway takes it
    now, not at its next 30 s retry)."""

    def on_tenant(event: EventType, old: Obj | None, new: Obj) -> None:
        if tenant_changed(event, old, new) or status_overwritten(
            event, old, new, ours=caches.tenants.ours(new)
        ):
            meta = new["metadata"]
            controller.enqueue(
                Key(meta["namespace"], meta["name"]), low_priority=can_wait(event, new)
            )

    def on_config(event: EventType, old: Obj | None, new: Obj) -> None:
        # Only default-tenant is a tenant's config; another one copying its labels and
        # annotations concerns neither the AITenant nor the platform. Its owner puts back
        # what a tenant admin changed of our labels and annotations.
        for key in owners_of_config(new, settings):
            controller.enqueue(key, low_priority=can_wait(event, new))

    def on_role(event: EventType, old: Obj | None, new: Obj) -> None:
        # A tenant-admin Role edited or deleted by someone else: restore it now.
        if event != "ADDED" and (key := annotated_owner(new)) is not None:
            controller.enqueue(key)

    def on_gateway(event: EventType, old: Obj | None, new: Obj) -> None:
        if (
            event == "MODIFIED"
            and old is not None
            and old["metadata"].get("generation") == new["metadata"].get("generation")
        ):
            return
        meta = new["metadata"]
        for namespace, name in caches.by_gateway.tenants_for_gateway(
            meta["namespace"], meta["name"]
        ):
            controller.enqueue(Key(namespace, name))

    def on_claim(event: EventType, old: Obj | None, new: Obj) -> None:
        data = new.get("data") or {}
        if event == "DELETED" and data.get("gatewayNamespace") and data.get("gatewayName"):
            for namespace, name in caches.by_gateway.tenants_for_gateway(
                data["gatewayNamespace"], data["gatewayName"]
            ):
                controller.enqueue(Key(namespace, name))

    caches.tenants.add_handler(on_tenant)
    caches.configs.add_handler(on_config)
    caches.gateways.add_handler(on_gateway)
    caches.roles.add_handler(on_role)
    caches.claims.add_handler(on_claim)
