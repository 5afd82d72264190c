"""The informers and read caches both controllers and the default-tenant bootstrap share: what
every pass reads instead of the API, and the order in which they start. Which of them wakes or
holds back which controller is each controller's ``setup.py``."""

from __future__ import annotations

from dataclasses import dataclass

from lightkube import AsyncClient
from lightkube.resources.core_v1 import ConfigMap, Namespace, Secret
from lightkube.resources.rbac_authorization_v1 import Role

from aitenant import contract
from aitenant.gateway_index import TenantsByGateway, index_by_gateway
from aitenant.platform.cache import PlatformCache
from aitenant.resources import AITenant, Config, Gateway, LegacyTenant, MaasTenantConfig
from aitenant.runtime.cache.informer import Informer, Obj
from aitenant.runtime.cache.reads import CachedReads
from aitenant.runtime.serving.metrics import Metrics
from aitenant.settings import Settings

TENANT_PHASES = (
    contract.PHASE_PENDING,
    contract.PHASE_ACTIVE,
    contract.PHASE_FAILED,
    contract.PHASE_TERMINATING,
)


@dataclass(frozen=True)
class Caches:
    # What the controllers queue keys of.
    tenants: Informer
    configs: Informer
    # Read caches for the tenant's children, so a pass over an unchanged tenant reads little
    # from the API (and a few faulty answers do not fail most passes).
    gateways: Informer
    claims: Informer
    roles: Informer
    # Read caches whose misses are answers too, so a resync of settled tenants reads nothing
    # from the API: every namespace (metadata and phase only), the legacy Tenants (one name per
    # namespace; its CRD may be absent) and the maas-api DB Secret.
    namespaces: Informer
    legacy_tenants: Informer
    db_secret: Informer
    # Everything the tenants' platforms are made of.
    platform: PlatformCache
    # Config/default, for the default-tenant bootstrap; None with --manage-default-tenant=false.
    config_anchor: Informer | None
    reads: CachedReads
    by_gateway: TenantsByGateway

    def start_order(self) -> list[Informer]:
        """Every informer, in the order the manager starts them (runtime/control/manager.py):
        what an AITenant pass reads first, then the platform's larger caches, so the first
        passes need not wait for those; last the Config, not a readiness requirement (without
        the Config CRD the rest of the controller works)."""
        tenant_side = [
            self.tenants,
            self.configs,
            self.gateways,
            self.claims,
            self.roles,
            self.namespaces,
            self.legacy_tenants,
            self.db_secret,
        ]
        anchor = [self.config_anchor] if self.config_anchor is not None else []
        return [*tenant_side, *self.platform.informers, *anchor]

    def required(self) -> list[Informer]:
        """What the manager waits for before the leader-only loops (and readiness)."""
        return [self.tenants, self.configs]


def build_caches(settings: Settings, client: AsyncClient, metrics: Metrics) -> Caches:
    tenants = Informer(client, AITenant)
    metrics.track_phases(
        tenants.list,
        metric="aitenant_tenants",
        noun="AITenants",
        phases=TENANT_PHASES,
        steady=contract.PHASE_ACTIVE,
    )
    by_gateway = index_by_gateway(tenants, settings.gateway_namespace)
    configs = Informer(client, MaasTenantConfig)
    claims = Informer(
        client,
        ConfigMap,
        namespace=settings.aitenant_namespace,
        labels={contract.LABEL_GATEWAY_CLAIM: "true"},
    )
    caches = Caches(
        tenants=tenants,
        configs=configs,
        gateways=Informer(client, Gateway, namespace=settings.gateway_namespace),
        claims=claims,
        roles=Informer(client, Role, labels={contract.LABEL_MANAGED_BY_AITENANT: "true"}),
        namespaces=Informer(client, Namespace, namespace=None, transform=namespace_view),
        legacy_tenants=Informer(
            client,
            LegacyTenant,
            fields={"metadata.name": contract.LEGACY_TENANT_NAME},
            optional=True,
        ),
        db_secret=Informer(
            client,
            Secret,
            namespace=settings.effective_infra_namespace,
            fields={"metadata.name": settings.maas_api_db_secret},
        ),
        platform=PlatformCache(
            client,
            infra_namespace=settings.effective_infra_namespace,
            gateway_namespace=settings.gateway_namespace,
        ),
        config_anchor=(
            Informer(client, Config, namespace=None) if settings.manage_default_tenant else None
        ),
        reads=CachedReads(client),
        by_gateway=by_gateway,
    )
    serve_reads(caches)
    return caches


def serve_reads(caches: Caches) -> None:
    """``CachedReads`` answers from these informers once they have synced."""
    for informer in (caches.gateways, caches.db_secret):
        caches.reads.serve(informer)
    # Their callers create on None and read the object back on AlreadyExists, or (legacy
    # Tenants) take a miss as "none": a miss may be trusted.
    for informer in (
        caches.configs,
        caches.claims,
        caches.roles,
        caches.namespaces,
        caches.legacy_tenants,
    ):
        caches.reads.serve(informer, trust_misses=True)


def namespace_view(obj: Obj) -> Obj:
    """What reconcilers read of a Namespace: its metadata and phase (the cache holds every
    namespace of the cluster, so nothing more)."""
    phase = (obj.get("status") or {}).get("phase")
    return {"metadata": obj["metadata"], "status": {"phase": phase} if phase else {}}
