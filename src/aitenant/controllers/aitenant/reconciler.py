"""The AITenant reconciler: the create path of a live AITenant, in the order and with the step
numbers of docs/contract.md §3.4, and dispatch to deletion (``deletion.py``).

Level-triggered: each pass writes only what differs and goes on after a write
(docs/differences.md D1). A failure caused by a transient API answer (409, 429, 5xx, a broken
connection) is recorded like any other but retried with the per-key backoff, not the fixed
30 s: a pass makes several uncached requests, so at a few percent of faults a fixed 30 s would
leave tenants failing for minutes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from aitenant import contract, naming
from aitenant.controllers import conditions, ownership
from aitenant.controllers import legacy_tenant as legacy
from aitenant.controllers.aitenant import infra_labels
from aitenant.controllers.aitenant.context import TenantContext, check_placement
from aitenant.controllers.aitenant.deletion import release_gateway_labels
from aitenant.controllers.aitenant.gateway_claim import GatewayClaims
from aitenant.controllers.aitenant.legacy_migration import LegacyMigration
from aitenant.controllers.aitenant.rbac import TenantRoles
from aitenant.controllers.aitenant.stale_keys import REQUEUE_STALE_REVOCATION, StaleKeys
from aitenant.controllers.finalizers import ensure_finalizer
from aitenant.controllers.status import StatusWriter
from aitenant.errors import StepFailed, after_failure
from aitenant.resources import AITenant, AITenantView, Gateway, MaasTenantConfig, Obj
from aitenant.runtime.cache.reads import CachedReads
from aitenant.runtime.client.api_errors import already_exists, api_message, namespace_missing
from aitenant.runtime.client.events import EventRecorder
from aitenant.runtime.client.requests import merge_patch
from aitenant.runtime.control.controller import Done, Key, RequeueAfter, Result
from aitenant.settings import Settings

log = logging.getLogger(__name__)

Reason = contract.Reason
REQUEUE_FAILED = 30.0
REQUEUE_NAMESPACE_PENDING = 1.0

Finalize = Callable[[AITenantView, "StatusWriter"], Awaitable[Result]]


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
        stale_keys: StaleKeys,
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
        self.stale_keys = stale_keys
        self.claims = GatewayClaims(
            client=client, reads=reads, namespace=settings.aitenant_namespace
        )
        self.roles = TenantRoles(client=client, reads=reads)
        self.legacy = LegacyMigration(client=client, reads=reads, settings=settings)

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
        tenant, legacy_tenant = await self.legacy.migrate_legacy_platform_context(
            tenant, tenant_namespace, status
        )
        gw_namespace, gw_name = naming.gateway_ref_for(tenant.obj, self.settings.gateway_namespace)
        ctx = TenantContext(tenant, tenant_namespace, gw_namespace, gw_name, legacy_tenant)
        await self.release_previous_gateway_labels(ctx)
        await self.persist_platform_context(ctx, status)
        config: Obj | None = None
        if tenant.is_default:
            config = await self.ensure_tenant_resources(ctx)
        gateway = await self.check_gateway(ctx)
        await self.ensure_infra_namespace_gateway_labels(ctx, gateway, status)
        await self.claims.ensure_gateway_claim(ctx)
        if not tenant.is_default:
            config = await self.ensure_tenant_resources(ctx)
        await self.roles.ensure_tenant_admin_roles(ctx)
        if config is None or not conditions.is_ready(config):
            status.set_phase(
                contract.PHASE_PENDING,
                Reason.TENANT_CONFIG_NOT_READY,
                config_not_ready_message(config),
            )
            await status.flush()
            return RequeueAfter(REQUEUE_FAILED)
        if not await self.stale_keys.revoked(tenant, status):
            await status.flush()
            return RequeueAfter(REQUEUE_STALE_REVOCATION)
        status.set_phase(contract.PHASE_ACTIVE, Reason.RECONCILED, contract.Message.RECONCILED)
        await status.flush()
        return Done()

    def status_writer(self, obj: Obj, generation: int) -> StatusWriter:
        return StatusWriter(
            self.client, AITenant, obj, generation, self.remember, events=self.events
        )

    # -- steps ---------------------------------------------------------------------------------
    async def persist_platform_context(self, ctx: TenantContext, status: StatusWriter) -> None:
        """status.gatewayRef is what the platform reconciler reads: write it before children."""
        status.status["tenantNamespace"] = ctx.tenant_namespace
        status.status["gatewayRef"] = {"name": ctx.gateway_name, "namespace": ctx.gateway_namespace}
        await status.flush()

    async def release_previous_gateway_labels(self, ctx: TenantContext) -> None:
        """Before status.gatewayRef moves on, so a failed pass tries again: the previous
        Gateway's selector labels are this tenant's to release, unless another tenant has
        claimed that Gateway since."""
        ref = ctx.tenant.status.get("gatewayRef") or {}
        previous = (ref.get("namespace") or "", ref.get("name") or "")
        if not all(previous) or previous == (ctx.gateway_namespace, ctx.gateway_name):
            return
        old = TenantContext(ctx.tenant, ctx.tenant_namespace, *previous)
        await release_gateway_labels(
            self.client, self.reads, self.claims, self.settings.effective_infra_namespace, old
        )

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
            what = f"get Gateway {ns}/{name}"
            raise StepFailed.from_api(Reason.GATEWAY_CHECK_FAILED, exc, what) from None
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

    async def ensure_tenant_resources(self, ctx: TenantContext) -> Obj:
        """The tenant namespace, then MaasTenantConfig/default-tenant; returns the config."""
        try:
            await self.ensure_tenant_namespace(ctx)
        except ApiError as exc:
            raise StepFailed.from_api(Reason.TENANT_NAMESPACE_FAILED, exc) from None
        try:
            return await self.ensure_tenant_config(ctx)
        except ApiError as exc:
            raise StepFailed.from_api(Reason.TENANT_CONFIG_RECONCILE_FAILED, exc) from None

    async def ensure_tenant_namespace(self, ctx: TenantContext) -> None:
        name = ctx.tenant_namespace
        ns = await self.reads.get(Namespace, name)
        if ns is None:
            body = Namespace(
                metadata=ObjectMeta(
                    name=name,
                    labels=ownership.created_labels(
                        {**ctx.labels, **ownership.CREATED_NAMESPACE_LABELS}
                    ),
                    annotations={**ctx.annotations, **ownership.CREATED_NAMESPACE_ANNOTATIONS},
                )
            )
            try:
                await self.client.create(body)
                return
            except ApiError as exc:
                if not already_exists(exc):
                    raise StepFailed.from_api(
                        Reason.TENANT_NAMESPACE_FAILED, exc, f'create tenant namespace "{name}"'
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
                raise StepFailed.from_api(
                    Reason.TENANT_NAMESPACE_FAILED, exc, f'patch tenant namespace "{name}"'
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
            config = await self._create_tenant_config(ctx, ref)
        meta = config["metadata"]
        if meta.get("deletionTimestamp"):
            raise StepFailed(
                Reason.TENANT_CONFIG_RECONCILE_FAILED,
                f"{ref} is being deleted; waiting for cleanup to finish before recreating",
            )
        if ownership.managed_by_rival(
            meta.get("annotations"), ctx.tenant.name, ctx.tenant.namespace, self.rivals(ns)
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
                config = await merge_patch(self.client, MaasTenantConfig, name, patch, namespace=ns)
            except ApiError as exc:
                raise StepFailed.from_api(
                    Reason.TENANT_CONFIG_RECONCILE_FAILED, exc, f"patch {ref}"
                ) from None
        await self.legacy.retire_legacy_tenant(ctx, config)
        return config

    def rivals(self, tenant_namespace: str) -> list[str]:
        """The AITenants that could own a config in ``tenant_namespace``."""
        return naming.tenants_for_namespace(
            tenant_namespace, self.settings.maas_subscription_namespace
        )

    async def _create_tenant_config(self, ctx: TenantContext, ref: str) -> Obj:
        """Create the config (with the legacy Tenant's settings), or read back the one that
        appeared meanwhile."""
        ns, name = ctx.tenant_namespace, contract.TENANT_CONFIG_NAME
        body = {
            "apiVersion": contract.API_VERSION,
            "kind": "MaasTenantConfig",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": ownership.created_labels(ctx.labels),
                "annotations": ctx.annotations,
            },
            "spec": legacy.config_spec_fill({}, ctx.legacy_tenant),
        }
        try:
            return dict(await self.client.create(MaasTenantConfig.from_dict(body)))
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
                raise StepFailed.from_api(
                    Reason.TENANT_CONFIG_RECONCILE_FAILED, exc, f"create {ref}"
                ) from None
            return dict(await self.client.get(MaasTenantConfig, name, namespace=ns))


def config_not_ready_message(config: Obj | None) -> str:
    """What the tenant waits for, with the config's own reason and message when it has said
    why (docs/contract.md §3.4 step 14): an operator reads the tenant, not its config."""
    cond = conditions.find_condition((config or {}).get("status") or {}, contract.CONDITION_READY)
    if cond is None or cond.get("status") != "False" or not cond.get("reason"):
        return contract.Message.CONFIG_NOT_READY
    return f"{contract.Message.CONFIG_NOT_READY}: {cond['reason']}: {cond.get('message', '')}"
