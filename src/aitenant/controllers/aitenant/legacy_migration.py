"""Migration from a legacy ``Tenant/default-tenant``: the reads and writes (docs/contract.md §6),
decided by ``legacy_tenant.py``. ``migrate_legacy_platform_context`` is step 5 of
docs/contract.md §3.4 (docs/contract.md §6.1); ``retire_legacy_tenant`` runs after the
MaasTenantConfig was created or adopted, in step 12 (docs/contract.md §6.2-6.4).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lightkube import ApiError, AsyncClient

from aitenant import contract
from aitenant.controllers import legacy_tenant as legacy
from aitenant.controllers.aitenant.context import TenantContext
from aitenant.controllers.status import StatusWriter
from aitenant.errors import StepFailed
from aitenant.resources import AITenant, AITenantView, LegacyTenant, Obj
from aitenant.runtime.cache.reads import CachedReads
from aitenant.runtime.client.api_errors import is_conflict, is_not_found
from aitenant.runtime.client.requests import delete_with_preconditions, merge_patch
from aitenant.settings import Settings

log = logging.getLogger(__name__)

Reason = contract.Reason


@dataclass(frozen=True, kw_only=True)
class LegacyMigration:
    """Steps 2a and 8 of the AITenant reconciler, for the legacy object in the tenant
    namespace."""

    settings: Settings
    client: AsyncClient
    # The legacy Tenants from their informer (one name per namespace; its CRD may be absent).
    reads: CachedReads

    async def migrate_legacy_platform_context(
        self, tenant: AITenantView, tenant_namespace: str, status: StatusWriter
    ) -> tuple[AITenantView, Obj | None]:
        """Fill the spec from a legacy Tenant/default-tenant (docs/contract.md §6.1); returns
        (tenant, legacy).

        A legacy Tenant that cannot be migrated is ``LegacyTenantMigrationFailed`` without
        requeue: only a change brings the tenant back. An API error on the way is reported the
        same but retried, so no tenant is stranded by a transient 5xx (docs/contract.md §6.1).
        A successful spec patch does not end the pass (docs/differences.md D1): the rest of the
        pass runs on the patched object.
        """
        failed = Reason.LEGACY_TENANT_MIGRATION_FAILED
        try:
            legacy_tenant = await self.reads.get(
                LegacyTenant, contract.LEGACY_TENANT_NAME, tenant_namespace
            )
        except ApiError as exc:
            raise StepFailed.from_api(failed, exc) from None
        if legacy_tenant is None:
            return tenant, None
        legacy_tenant = dict(legacy_tenant)
        try:
            patch = legacy.platform_context_patch(
                tenant=tenant.obj,
                legacy=legacy_tenant,
                gateway_namespace=self.settings.gateway_namespace,
                default_gateway_name=self.settings.gateway_name,
            )
        except legacy.MigrationError as exc:
            raise StepFailed(failed, str(exc), requeue_after=None, cause=exc) from None
        if patch is None:
            return tenant, legacy_tenant
        updated = await self._fill_spec(tenant, patch)
        log.info(
            "aitenant %s/%s: filled %s from legacy Tenant %s/%s",
            tenant.namespace,
            tenant.name,
            ", ".join(f"spec.{k}" for k in sorted(patch["spec"])),
            tenant_namespace,
            contract.LEGACY_TENANT_NAME,
        )
        status.rebase(updated)
        return AITenantView(updated), legacy_tenant

    async def _fill_spec(self, tenant: AITenantView, patch: Obj) -> Obj:
        # Fill-only against the copy we decided on: a concurrent spec edit makes this a
        # conflict, retried with backoff on the newer object.
        patch["metadata"] = {"resourceVersion": tenant.obj["metadata"]["resourceVersion"]}
        try:
            updated = await merge_patch(
                self.client, AITenant, tenant.name, patch, namespace=tenant.namespace
            )
        except ApiError as exc:
            if is_conflict(exc):
                raise
            raise StepFailed.from_api(
                Reason.LEGACY_TENANT_MIGRATION_FAILED,
                exc,
                "patch AITenant with legacy Tenant platform context",
            ) from None
        return updated

    async def retire_legacy_tenant(self, ctx: TenantContext, config: Obj) -> None:
        """Mark the legacy Tenant migrated (docs/contract.md §6.3), then delete it once verified
        (docs/contract.md §6.4).

        The delete carries UID and resourceVersion preconditions: a legacy object changed (or
        replaced) since the verification is left for the next pass to judge again.
        """
        legacy_tenant = ctx.legacy_tenant
        if legacy_tenant is None:
            return
        tenant, ns = ctx.tenant, ctx.tenant_namespace
        name = contract.LEGACY_TENANT_NAME
        failed = Reason.TENANT_CONFIG_RECONCILE_FAILED
        patch = legacy.mark_patch(legacy_tenant, tenant.name, tenant.namespace)
        if patch is not None:
            try:
                legacy_tenant = await merge_patch(
                    self.client, LegacyTenant, name, patch, namespace=ns
                )
            except ApiError as exc:
                if is_not_found(exc):
                    return
                raise StepFailed.from_api(failed, exc) from None
            self.reads.remember(LegacyTenant, legacy_tenant)
            log.info("aitenant %s: legacy Tenant %s/%s marked migrated", tenant.name, ns, name)
        if not legacy.removal_verified(
            config=config,
            legacy=legacy_tenant,
            tenant_name=tenant.name,
            tenant_namespace=tenant.namespace,
            tenant_ns=ns,
        ):
            return
        legacy_meta = legacy_tenant["metadata"]
        try:
            await delete_with_preconditions(
                self.client,
                LegacyTenant,
                name,
                namespace=ns,
                uid=legacy_meta.get("uid"),
                resource_version=legacy_meta.get("resourceVersion"),
            )
        except ApiError as exc:
            if is_not_found(exc):
                return
            raise StepFailed.from_api(
                failed, exc, f"delete migrated legacy Tenant {ns}/{name}"
            ) from None
        log.info("aitenant %s: migrated legacy Tenant %s/%s removed", tenant.name, ns, name)
