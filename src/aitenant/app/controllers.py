"""Both reconcilers, each with its collaborators, and the controllers that run them; the
default-tenant bootstrap (a leader-only loop, not a controller)."""

from __future__ import annotations

from dataclasses import dataclass

from lightkube import AsyncClient

from aitenant import contract
from aitenant.controllers.caches import Caches
from aitenant.platform.apply import Applier
from aitenant.platform.discovery import ApiDiscovery, http_fetch
from aitenant.platform.prune import TrackedObjects
from aitenant.controllers.aitenant.reconciler import AITenantReconciler
from aitenant.controllers.default_tenant.bootstrap import DefaultTenantBootstrap
from aitenant.controllers.tenant_config.cleanup import ConfigCleanup
from aitenant.controllers.aitenant.deletion import TenantFinalizer
from aitenant.controllers.aitenant.revocation import KeyRevoker, Revocations
from aitenant.controllers.tenant_config.reconciler import TenantConfigReconciler
from aitenant.runtime.controller import Controller, Key, Reconcile
from aitenant.runtime.events import EventRecorder
from aitenant.runtime.informer import Informer
from aitenant.runtime.metrics import Metrics
from aitenant.settings import Settings


@dataclass(frozen=True)
class Controllers:
    aitenant: Controller
    config: Controller
    # The default-tenant bootstrap (leader only); None with --manage-default-tenant=false.
    bootstrap: DefaultTenantBootstrap | None


def build_controllers(
    settings: Settings, client: AsyncClient, metrics: Metrics, caches: Caches
) -> Controllers:
    def controller(name: str, reconcile: Reconcile, waits_for: list[Informer]) -> Controller:
        return Controller(
            name, reconcile, metrics=metrics, workers=settings.workers, caches=waits_for
        )

    # A controller waits for the caches its passes read that sync on any cluster; the Gateway's
    # and the platform's CRDs may be missing, and a pass reads those from the API until their
    # informers have synced.
    revocations = Revocations(KeyRevoker(ca_file=settings.maas_api_ca_file))
    controllers = Controllers(
        aitenant=controller(
            "aitenant",
            aitenant_reconciler(settings, client, caches, revocations).reconcile,
            [
                caches.tenants,
                caches.configs,
                caches.claims,
                caches.roles,
                caches.namespaces,
                caches.legacy_tenants,
            ],
        ),
        config=controller(
            "maastenantconfig",
            config_reconciler(settings, client, caches).reconcile,
            [caches.tenants, caches.configs, caches.db_secret, *caches.platform.built_in_informers],
        ),
        bootstrap=(
            DefaultTenantBootstrap(client=client, settings=settings)
            if settings.manage_default_tenant
            else None
        ),
    )
    # A revocation that ends wakes its tenant (it ran outside the workers).
    revocations.wake = lambda namespace, name: controllers.aitenant.enqueue(Key(namespace, name))
    return controllers


def aitenant_reconciler(
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
    )


def config_reconciler(
    settings: Settings, client: AsyncClient, caches: Caches
) -> TenantConfigReconciler:
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
