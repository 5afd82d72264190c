"""The AITenant reconciler: create path (docs/contract.md §3) and dispatch to deletion.

Level-triggered: every pass reads the AITenant from the informer cache and its children from the
API, computes what should exist and makes only the writes that differ. After a successful write the
pass continues (docs/differences.md D1); it requeues only while waiting on state it does not watch.
A pass over an Active tenant whose world is unchanged makes no write at all.

Flow of ``reconcile`` for a live AITenant, in order:

1. ``ensure_finalizer``
2. ``check_placement``                      → Failed/InvalidPlacement, no requeue
2a. ``migrate_legacy_platform_context``     legacy Tenant's gateway name and OIDC filled into
                                              the spec (docs/contract.md §6.1); the pass
                                              continues with the patched object →
                                              Failed/LegacyTenantMigrationFailed, no requeue
3. ``persist_platform_context``             status.tenantNamespace + status.gatewayRef written
                                              before any child exists
4. (default tenant) ``ensure_tenant_resources`` before the Gateway check
5. ``check_gateway``                        → Failed/GatewayCheckFailed, 30 s (and Gateway watch)
6. ``ensure_infra_namespace_gateway_labels`` → Degraded on error, never fatal
7. ``ensure_gateway_claim``                 → Failed/GatewayClaimFailed, 30 s
8. (other tenants) ``ensure_tenant_resources``: namespace, then MaasTenantConfig (legacy
   apiKeys/telemetry filled in at create/adopt time, then the legacy Tenant marked and, once
   verified, removed: docs/contract.md §6.2-6.4)
9. ``ensure_tenant_admin_roles``            → Failed/RBACReconcileFailed, 30 s
10. Active when the MaasTenantConfig is Ready at its generation, else Pending/TenantConfigNotReady

A failure caused by a transient API answer (409, 429, 5xx, a broken connection) is recorded
the same way but retried with the per-key backoff instead of the fixed 30 s: every pass makes
several uncached requests, so at a few percent of faults a fixed 30 s would leave tenants
failing for minutes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.models.rbac_v1 import PolicyRule
from lightkube.resources.core_v1 import ConfigMap, Namespace
from lightkube.resources.rbac_authorization_v1 import Role
from lightkube.types import PatchType

from aitenant import contract, naming
from aitenant.errors import (
    StepFailed,
    already_exists,
    api_message,
    is_conflict,
    is_not_found,
    namespace_missing,
)
from aitenant.reconcilers import conditions, infra_labels, legacy, ownership
from aitenant.reconcilers.finalizers import ensure_finalizer
from aitenant.reconcilers.status import StatusWriter
from aitenant.reconcilers.watches import CLAIM_OWNER_INDEX
from aitenant.resources import (
    AITenant,
    AITenantView,
    Gateway,
    LegacyTenant,
    MaasTenantConfig,
    Obj,
)
from aitenant.runtime.controller import Done, Key, RequeueAfter, Result, after_failure
from aitenant.runtime.events import EventRecorder
from aitenant.runtime.reads import CachedReads
from aitenant.runtime.requests import delete_with_preconditions
from aitenant.settings import Settings

log = logging.getLogger(__name__)

Reason = contract.Reason
REQUEUE_FAILED = 30.0
REQUEUE_NAMESPACE_PENDING = 1.0

Finalize = Callable[[AITenantView, "StatusWriter"], Awaitable[Result]]


def tenant_admin_rules() -> list[PolicyRule]:
    return [
        PolicyRule(
            apiGroups=[contract.GROUP],
            resources=["maasauthpolicies", "maassubscriptions"],
            verbs=["get", "list", "watch", "create", "update", "patch", "delete"],
        ),
        PolicyRule(
            apiGroups=[contract.GROUP],
            resources=["maastenantconfigs"],
            resourceNames=[contract.TENANT_CONFIG_NAME],
            verbs=["get", "update", "patch"],
        ),
        PolicyRule(
            apiGroups=[contract.GROUP], resources=["maasmodelrefs"], verbs=["get", "list", "watch"]
        ),
    ]


def object_admin_rules(name: str) -> list[PolicyRule]:
    return [
        PolicyRule(
            apiGroups=[contract.GROUP], resources=["aitenants"], resourceNames=[name], verbs=["get"]
        )
    ]


def check_placement(tenant: AITenantView, settings: Settings) -> str:
    """The derived tenant namespace, or StepFailed(InvalidPlacement) with upstream's message."""
    s = settings
    ref = f"AITenant {tenant.namespace}/{tenant.name}"
    infra = s.effective_infra_namespace
    subscription = s.maas_subscription_namespace
    tns = naming.tenant_namespace_for(tenant.name, subscription)
    problem = None
    if infra and tenant.namespace == infra:
        problem = f'{ref} must not be created in the protected application namespace "{infra}"'
    elif subscription and tenant.namespace == subscription:
        problem = (
            f"{ref} must be created in a separate infra namespace, not the tenant namespace "
            f'"{subscription}"'
        )
    elif tenant.namespace != s.aitenant_namespace:
        problem = (
            f"{ref} must be created in the configured AITenant infrastructure namespace "
            f'"{s.aitenant_namespace}"'
        )
    elif tns == tenant.namespace:
        problem = (
            "derived tenant namespace must be different from the AITenant infra namespace "
            f'"{tenant.namespace}"'
        )
    elif infra and tns == infra:
        problem = (
            f'derived tenant namespace must not be the protected application namespace "{infra}"'
        )
    elif errors := naming.dns1123_label_errors(tns):
        problem = f'derived tenant namespace "{tns}" is invalid: {"; ".join(errors)}'
    if problem:
        raise StepFailed(Reason.INVALID_PLACEMENT, problem, requeue_after=None)
    return tns


@dataclass
class TenantContext:
    """What one pass derived about the tenant it reconciles."""

    tenant: AITenantView
    tenant_namespace: str
    gateway_namespace: str
    gateway_name: str
    # Tenant/default-tenant in the tenant namespace, as read this pass (None: there is none).
    legacy_tenant: Obj | None = None

    @property
    def labels(self) -> dict[str, str]:
        return ownership.tenant_labels(self.tenant.name, self.tenant_namespace)

    @property
    def annotations(self) -> dict[str, str]:
        return ownership.tenant_annotations(self.tenant.name, self.tenant.namespace)


class AITenantReconciler:
    def __init__(
        self,
        *,
        client: AsyncClient,
        settings: Settings,
        events: EventRecorder,
        get_tenant: Callable[[str, str], Obj | None],
        remember: Callable[[Obj], None],
        reads: CachedReads,
        finalize: Finalize,
    ) -> None:
        self.client = client
        # Children (Gateway, claim, config, Roles) from informers where the manager runs them.
        self.reads = reads
        self.settings = settings
        self.events = events
        # The informer's copy, or the newer one our last write returned (``remember``).
        self.get_tenant = get_tenant
        self.remember = remember
        self.finalize = finalize

    # -- entry point ---------------------------------------------------------------------------
    async def reconcile(self, key: Key) -> Result:
        cached = self.get_tenant(key.namespace, key.name)
        if cached is None:
            return Done()
        started = time.perf_counter()
        tenant = AITenantView(cached)
        if tenant.deleting:
            if contract.AITENANT_FINALIZER not in tenant.finalizers:
                return Done()
            status = self.status_writer(cached, tenant.generation)
            return await self.finalize(tenant, status)
        obj = await ensure_finalizer(
            self.client, AITenant, tenant.obj, contract.AITENANT_FINALIZER, self.remember
        )
        tenant = AITenantView(obj)
        status = self.status_writer(obj, tenant.generation)
        try:
            result = await self._reconcile_live(tenant, status)
        except StepFailed as failure:
            status.set_phase(failure.phase, failure.reason, failure.message)
            await status.flush()
            log.info(
                "aitenant %s: %s (%s): %s", key, failure.phase, failure.reason, failure.message
            )
            return after_failure(failure)
        log.info(
            "aitenant %s: %s (%s) in %.0f ms",
            key,
            status.status.get("phase"),
            conditions.ready_reason(status.status),
            (time.perf_counter() - started) * 1000,
        )
        return result

    async def _reconcile_live(self, tenant: AITenantView, status: StatusWriter) -> Result:
        tenant_namespace = check_placement(tenant, self.settings)
        status.status["tenantNamespace"] = tenant_namespace
        tenant, legacy_tenant = await self.migrate_legacy_platform_context(
            tenant, tenant_namespace, status
        )
        gw_namespace, gw_name = naming.gateway_ref_for(tenant.obj, self.settings.gateway_namespace)
        ctx = TenantContext(tenant, tenant_namespace, gw_namespace, gw_name, legacy_tenant)
        await self.persist_platform_context(ctx, status)
        config: Obj | None = None
        if tenant.is_default:
            config = await self.ensure_tenant_resources(ctx)
        gateway = await self.check_gateway(ctx)
        await self.ensure_infra_namespace_gateway_labels(ctx, gateway, status)
        await self.ensure_gateway_claim(ctx)
        if not tenant.is_default:
            config = await self.ensure_tenant_resources(ctx)
        await self.ensure_tenant_admin_roles(ctx)
        if config is None or not conditions.is_ready(config):
            status.set_phase(
                contract.PHASE_PENDING,
                Reason.TENANT_CONFIG_NOT_READY,
                contract.Message.CONFIG_NOT_READY,
            )
            await status.flush()
            return RequeueAfter(REQUEUE_FAILED)
        status.set_phase(contract.PHASE_ACTIVE, Reason.RECONCILED, contract.Message.RECONCILED)
        await status.flush()
        return Done()

    def status_writer(self, obj: Obj, generation: int) -> StatusWriter:
        return StatusWriter(
            self.client, AITenant, obj, generation, self.remember, events=self.events
        )

    # -- steps ---------------------------------------------------------------------------------
    async def migrate_legacy_platform_context(
        self, tenant: AITenantView, tenant_namespace: str, status: StatusWriter
    ) -> tuple[AITenantView, Obj | None]:
        """Fill the spec from a legacy Tenant/default-tenant (docs/contract.md §6.1); returns
        (tenant, legacy).

        A legacy Tenant that cannot be migrated is ``LegacyTenantMigrationFailed`` without
        requeue, as upstream: only a change brings the tenant back. An API error on the way is
        reported the same but retried (upstream leaves it Failed until another event, which
        strands tenants on any transient 5xx). A successful spec patch does not end the
        pass (docs/differences.md D1): the rest of the pass runs on the patched object.
        """
        failed = Reason.LEGACY_TENANT_MIGRATION_FAILED
        try:
            legacy_tenant = await self.reads.get(
                LegacyTenant, contract.LEGACY_TENANT_NAME, tenant_namespace
            )
        except ApiError as exc:
            raise StepFailed(failed, api_message(exc), cause=exc) from None
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
        # Fill-only against the copy we decided on: a concurrent spec edit makes this a
        # conflict, retried with backoff on the newer object.
        patch["metadata"] = {"resourceVersion": tenant.obj["metadata"]["resourceVersion"]}
        try:
            updated = await self.client.patch(
                AITenant, tenant.name, patch, namespace=tenant.namespace, patch_type=PatchType.MERGE
            )
        except ApiError as exc:
            if is_conflict(exc):
                raise
            raise StepFailed(
                failed,
                f"patch AITenant with legacy Tenant platform context: {api_message(exc)}",
                cause=exc,
            ) from None
        log.info(
            "aitenant %s/%s: filled %s from legacy Tenant %s/%s",
            tenant.namespace,
            tenant.name,
            ", ".join(f"spec.{k}" for k in sorted(patch["spec"])),
            tenant_namespace,
            contract.LEGACY_TENANT_NAME,
        )
        obj = dict(updated)
        status.rebase(obj)
        return AITenantView(obj), legacy_tenant

    async def persist_platform_context(self, ctx: TenantContext, status: StatusWriter) -> None:
        """status.gatewayRef is what the platform reconciler reads: write it before children."""
        status.status["tenantNamespace"] = ctx.tenant_namespace
        status.status["gatewayRef"] = {"name": ctx.gateway_name, "namespace": ctx.gateway_namespace}
        await status.flush()

    async def check_gateway(self, ctx: TenantContext) -> Obj:
        """Read-only: the Gateway must exist. It is never created, labelled or adopted."""
        ns, name = ctx.gateway_namespace, ctx.gateway_name
        if not ns:
            raise StepFailed(
                Reason.GATEWAY_CHECK_FAILED,
                "gateway namespace is required; set --gateway-namespace",
            )
        if not name:
            raise StepFailed(
                Reason.GATEWAY_CHECK_FAILED,
                "spec.gateway.name is required when AITenant name is empty",
            )
        try:
            gateway = await self.reads.get(Gateway, name, ns)
        except ApiError as exc:
            message = f"get Gateway {ns}/{name}: {api_message(exc)}"
            raise StepFailed(Reason.GATEWAY_CHECK_FAILED, message, cause=exc) from None
        if gateway is None:
            raise StepFailed(
                Reason.GATEWAY_CHECK_FAILED,
                f"gateway {ns}/{name} not found: the Gateway must be created by a network or "
                "cluster administrator before AITenant can be provisioned",
            )
        return gateway

    async def ensure_infra_namespace_gateway_labels(
        self, ctx: TenantContext, gateway: Obj, status: StatusWriter
    ) -> None:
        """Non-fatal: a failure sets Degraded and the tenant carries on."""
        infra = self.settings.effective_infra_namespace
        try:
            wanted = infra_labels.desired_labels(gateway)
            try:
                ns = await self.reads.get(Namespace, infra)
            except ApiError as exc:
                raise infra_labels.LabelConflict(
                    f"read infra namespace {infra}: {api_message(exc)}"
                ) from None
            if ns is None and wanted:
                raise infra_labels.LabelConflict(
                    f'read infra namespace {infra}: namespaces "{infra}" not found'
                )
            if ns is not None:
                meta = ns.metadata or ObjectMeta()
                patch = infra_labels.plan_ensure(
                    namespace=infra,
                    labels=meta.labels,
                    annotations=meta.annotations,
                    gateway_name=ctx.gateway_name,
                    wanted=wanted,
                )
                if patch is not None:
                    patch["metadata"]["resourceVersion"] = meta.resourceVersion
                    self.reads.remember(
                        Namespace,
                        await self.client.patch(
                            Namespace, infra, patch, patch_type=PatchType.MERGE
                        ),
                    )
        except (infra_labels.LabelConflict, ApiError) as exc:
            message = exc.args[0] if isinstance(exc, infra_labels.LabelConflict) else str(exc)
            log.warning("aitenant %s: infra namespace labels: %s", ctx.tenant.name, message)
            conditions.set_condition(
                status.status,
                type_=contract.CONDITION_DEGRADED,
                state=True,
                reason=Reason.INFRA_NAMESPACE_LABEL_FAILED,
                message=message,
                generation=ctx.tenant.generation,
            )
            return
        conditions.remove_condition(status.status, contract.CONDITION_DEGRADED)

    async def ensure_gateway_claim(self, ctx: TenantContext) -> None:
        try:
            await self._ensure_gateway_claim(ctx)
        except ApiError as exc:
            raise StepFailed(Reason.GATEWAY_CLAIM_FAILED, api_message(exc), cause=exc) from None

    async def _ensure_gateway_claim(self, ctx: TenantContext) -> None:
        tenant = ctx.tenant
        ns = self.settings.aitenant_namespace
        gw_ns, gw_name = ctx.gateway_namespace, ctx.gateway_name
        if not gw_ns or not gw_name:
            raise StepFailed(
                Reason.GATEWAY_CLAIM_FAILED,
                "gateway reference must have both namespace and name set "
                f'(got namespace="{gw_ns}", name="{gw_name}")',
            )
        name = naming.claim_name(gw_ns, gw_name)
        owner = OwnerReference(
            apiVersion=contract.API_VERSION,
            kind="AITenant",
            name=tenant.name,
            uid=tenant.uid,
            controller=True,
            blockOwnerDeletion=True,
        )
        claim = await self.reads.get(ConfigMap, name, ns)
        if claim is None:
            body = ConfigMap(
                metadata=ObjectMeta(
                    name=name,
                    namespace=ns,
                    labels={
                        contract.LABEL_MANAGED_BY: contract.MANAGED_BY_VALUE,
                        contract.LABEL_GATEWAY_CLAIM: "true",
                        contract.LABEL_MANAGED_BY_AITENANT: "true",
                    },
                    annotations=ctx.annotations,
                    ownerReferences=[owner],
                ),
                data={"gatewayNamespace": gw_ns, "gatewayName": gw_name},
            )
            try:
                await self.client.create(body)
            except ApiError as exc:
                if not already_exists(exc):
                    raise
                claim = await self.client.get(ConfigMap, name, namespace=ns)
        if claim is not None:
            await self._check_existing_claim(ctx, claim, owner)
        await self._delete_stale_claims(ctx, keep=name)

    async def _check_existing_claim(
        self, ctx: TenantContext, claim: ConfigMap, owner: OwnerReference
    ) -> None:
        tenant = ctx.tenant
        meta = claim.metadata or ObjectMeta()
        ns = self.settings.aitenant_namespace
        if not claim_owned_by(meta, tenant):
            owner_ns, owner_name = claim_owner(meta)
            raise StepFailed(
                Reason.GATEWAY_CLAIM_FAILED,
                f"gateway {ctx.gateway_namespace}/{ctx.gateway_name} is already claimed by "
                f"AITenant {owner_ns}/{owner_name}; each AITenant requires a dedicated Gateway "
                "for isolation",
            )
        data = claim.data or {}
        if (data.get("gatewayNamespace"), data.get("gatewayName")) != (
            ctx.gateway_namespace,
            ctx.gateway_name,
        ):
            raise StepFailed(
                Reason.GATEWAY_CLAIM_FAILED,
                f"claim {ns}/{meta.name} already exists for gateway "
                f"{data.get('gatewayNamespace', '')}/{data.get('gatewayName', '')} but tenant "
                f"{tenant.namespace}/{tenant.name} needs "
                f"{ctx.gateway_namespace}/{ctx.gateway_name}; "
                "this indicates a hash collision or stale claim",
            )
        refs = [r for r in (meta.ownerReferences or []) if not r.controller]
        refs.append(owner)
        if [r.to_dict() for r in meta.ownerReferences or []] != [r.to_dict() for r in refs]:
            meta.ownerReferences = refs
            await self.client.replace(claim)

    async def _delete_stale_claims(self, ctx: TenantContext, *, keep: str) -> None:
        ns = self.settings.aitenant_namespace
        claims = await self.reads.list(
            ConfigMap,
            namespace=ns,
            labels={contract.LABEL_GATEWAY_CLAIM: "true"},
            index=(CLAIM_OWNER_INDEX, ctx.tenant.name),  # not every claim: this tenant's
        )
        for claim in claims:
            meta = claim.metadata or ObjectMeta()
            if meta.name != keep and claim_owned_by(meta, ctx.tenant):
                try:
                    await self.client.delete(ConfigMap, meta.name or "", namespace=ns)
                except ApiError as exc:
                    if not is_not_found(exc):
                        raise

    async def ensure_tenant_resources(self, ctx: TenantContext) -> Obj:
        """The tenant namespace, then MaasTenantConfig/default-tenant; returns the config."""
        try:
            await self.ensure_tenant_namespace(ctx)
        except ApiError as exc:
            raise StepFailed(Reason.TENANT_NAMESPACE_FAILED, api_message(exc), cause=exc) from None
        try:
            return await self.ensure_tenant_config(ctx)
        except ApiError as exc:
            raise StepFailed(
                Reason.TENANT_CONFIG_RECONCILE_FAILED, api_message(exc), cause=exc
            ) from None

    async def ensure_tenant_namespace(self, ctx: TenantContext) -> None:
        name = ctx.tenant_namespace
        ns = await self.reads.get(Namespace, name)
        if ns is None:
            body = Namespace(
                metadata=ObjectMeta(
                    name=name,
                    labels={**ctx.labels, **ownership.CREATED_NAMESPACE_LABELS},
                    annotations={**ctx.annotations, **ownership.CREATED_NAMESPACE_ANNOTATIONS},
                )
            )
            try:
                await self.client.create(body)
                return
            except ApiError as exc:
                if not already_exists(exc):
                    raise StepFailed(
                        Reason.TENANT_NAMESPACE_FAILED,
                        f'create tenant namespace "{name}": {api_message(exc)}',
                        cause=exc,
                    ) from None
                ns = await self.client.get(Namespace, name)
        meta = ns.metadata or ObjectMeta()
        if ns.status is not None and ns.status.phase == "Terminating":
            raise StepFailed(
                Reason.TENANT_NAMESPACE_FAILED, f'tenant namespace "{name}" is terminating'
            )
        if ownership.managed_by_other(meta.annotations, ctx.tenant.name, ctx.tenant.namespace):
            raise StepFailed(
                Reason.TENANT_NAMESPACE_FAILED,
                f'tenant namespace "{name}" is managed by another AITenant',
            )
        patch = ownership.metadata_patch(meta.labels, meta.annotations, ctx.labels, ctx.annotations)
        if patch is not None:
            try:
                self.reads.remember(
                    Namespace,
                    await self.client.patch(Namespace, name, patch, patch_type=PatchType.MERGE),
                )
            except ApiError as exc:
                raise StepFailed(
                    Reason.TENANT_NAMESPACE_FAILED,
                    f'patch tenant namespace "{name}": {api_message(exc)}',
                    cause=exc,
                ) from None

    async def ensure_tenant_config(self, ctx: TenantContext) -> Obj:
        """Create or adopt the config; only our labels/annotations are asserted, never spec.

        The one exception is the fill-only copy of a legacy Tenant's apiKeys/telemetry, made
        when the config is created or adopted, never later (an admin's edit is never reverted).
        """
        ns, name = ctx.tenant_namespace, contract.TENANT_CONFIG_NAME
        ref = f"MaasTenantConfig {ns}/{name}"
        config = await self.reads.get(MaasTenantConfig, name, ns)
        if config is None:
            body = {
                "apiVersion": contract.API_VERSION,
                "kind": "MaasTenantConfig",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": ctx.labels,
                    "annotations": ctx.annotations,
                },
                "spec": legacy.config_spec_fill({}, ctx.legacy_tenant),
            }
            try:
                config = dict(await self.client.create(MaasTenantConfig.from_dict(body)))
            except ApiError as exc:
                if namespace_missing(exc):
                    raise StepFailed(
                        Reason.TENANT_NAMESPACE_PENDING,
                        contract.Message.NAMESPACE_NOT_ACCEPTING,
                        phase=contract.PHASE_PENDING,
                        requeue_after=REQUEUE_NAMESPACE_PENDING,
                        cause=exc,
                    ) from None
                if not already_exists(exc):
                    raise StepFailed(
                        Reason.TENANT_CONFIG_RECONCILE_FAILED,
                        f"create {ref}: {api_message(exc)}",
                        cause=exc,
                    ) from None
                config = dict(await self.client.get(MaasTenantConfig, name, namespace=ns))
        meta = config["metadata"]
        if meta.get("deletionTimestamp"):
            raise StepFailed(
                Reason.TENANT_CONFIG_RECONCILE_FAILED,
                f"{ref} is being deleted; waiting for cleanup to finish before recreating",
            )
        if ownership.managed_by_other(
            meta.get("annotations"), ctx.tenant.name, ctx.tenant.namespace
        ):
            raise StepFailed(
                Reason.TENANT_CONFIG_RECONCILE_FAILED, f"{ref} is managed by another AITenant"
            )
        adopting = not ownership.owned_by(
            meta.get("annotations"), ctx.tenant.name, ctx.tenant.namespace
        )
        patch = ownership.metadata_patch(
            meta.get("labels"), meta.get("annotations"), ctx.labels, ctx.annotations
        )
        if adopting and (fill := legacy.config_spec_fill(config.get("spec"), ctx.legacy_tenant)):
            patch = {**(patch or {}), "spec": fill}
        if patch is not None:
            try:
                config = dict(
                    await self.client.patch(
                        MaasTenantConfig, name, patch, namespace=ns, patch_type=PatchType.MERGE
                    )
                )
            except ApiError as exc:
                raise StepFailed(
                    Reason.TENANT_CONFIG_RECONCILE_FAILED,
                    f"patch {ref}: {api_message(exc)}",
                    cause=exc,
                ) from None
        await self.retire_legacy_tenant(ctx, config)
        return config

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
                legacy_tenant = dict(
                    await self.client.patch(
                        LegacyTenant, name, patch, namespace=ns, patch_type=PatchType.MERGE
                    )
                )
            except ApiError as exc:
                if is_not_found(exc):
                    return
                raise StepFailed(failed, api_message(exc), cause=exc) from None
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
            raise StepFailed(
                failed,
                f"delete migrated legacy Tenant {ns}/{name}: {api_message(exc)}",
                cause=exc,
            ) from None
        log.info("aitenant %s: migrated legacy Tenant %s/%s removed", tenant.name, ns, name)

    async def ensure_tenant_admin_roles(self, ctx: TenantContext) -> None:
        """Two Roles with exactly upstream's rules. RoleBindings are the administrators' job."""
        tenant = ctx.tenant
        await self._upsert_role(
            ctx,
            naming.tenant_admin_role_name(tenant.name),
            ctx.tenant_namespace,
            tenant_admin_rules(),
        )
        await self._upsert_role(
            ctx,
            naming.object_admin_role_name(tenant.name),
            tenant.namespace,
            object_admin_rules(tenant.name),
        )

    async def _upsert_role(
        self, ctx: TenantContext, name: str, namespace: str, rules: list[PolicyRule]
    ) -> None:
        ref = f"Role {namespace}/{name}"

        def failed(what: str, exc: ApiError) -> StepFailed:
            return StepFailed(
                Reason.RBAC_RECONCILE_FAILED, f"{what} {ref}: {api_message(exc)}", cause=exc
            )

        try:
            role = await self.reads.get(Role, name, namespace)
        except ApiError as exc:
            raise failed("get", exc) from None
        if role is None:
            body = Role(
                metadata=ObjectMeta(
                    name=name, namespace=namespace, labels=ctx.labels, annotations=ctx.annotations
                ),
                rules=rules,
            )
            try:
                await self.client.create(body)
                return
            except ApiError as exc:
                if not already_exists(exc):
                    raise failed("create", exc) from None
            try:
                role = await self.client.get(Role, name, namespace=namespace)
            except ApiError as exc:
                raise failed("get", exc) from None
        meta = role.metadata or ObjectMeta()
        if ownership.managed_by_other(meta.annotations, ctx.tenant.name, ctx.tenant.namespace):
            raise StepFailed(Reason.RBAC_RECONCILE_FAILED, f"{ref} is managed by another AITenant")
        patch: dict[str, Any] = (
            ownership.metadata_patch(meta.labels, meta.annotations, ctx.labels, ctx.annotations)
            or {}
        )
        want_rules = [r.to_dict() for r in rules]
        if [r.to_dict() for r in role.rules or []] != want_rules:
            patch["rules"] = want_rules
        if patch:
            try:
                await self.client.patch(
                    Role, name, patch, namespace=namespace, patch_type=PatchType.MERGE
                )
            except ApiError as exc:
                raise failed("patch", exc) from None


def claim_owned_by(meta: ObjectMeta, tenant: AITenantView) -> bool:
    """Upstream's claim-ownership rule: the controller ownerRef first, annotations as fallback."""
    controller = next((r for r in meta.ownerReferences or [] if r.controller), None)
    if controller is not None:
        if controller.kind != "AITenant" or controller.name != tenant.name:
            return False
        if controller.uid and tenant.uid:
            return controller.uid == tenant.uid
    return ownership.owned_by(meta.annotations, tenant.name, tenant.namespace)


def claim_owner(meta: ObjectMeta) -> tuple[str, str]:
    ann = meta.annotations or {}
    owner_ns = ann.get(contract.ANNOTATION_AITENANT_NAMESPACE, "")
    owner_name = ann.get(contract.ANNOTATION_AITENANT_NAME, "")
    controller = next((r for r in meta.ownerReferences or [] if r.controller), None)
    if controller is not None and controller.kind == "AITenant":
        owner_name = controller.name
    return owner_ns, owner_name
