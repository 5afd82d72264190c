"""AITenant deletion, ``TenantFinalizer.finalize``: the steps of docs/contract.md §5.1, in its
order (docs/differences.md D2 and D8).

Reads come from the informers where one holds the kind, as in a reconcile pass: a pass that runs
because the config is gone was woken by that very event. Only legacy RoleBindings, which nothing
watches, are read from the API; a write made on a stale copy fails on its resourceVersion and
the pass is retried.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from aitenant import contract, naming
from aitenant.controllers import conditions, ownership
from aitenant.controllers.aitenant import infra_labels
from aitenant.controllers.aitenant.context import TenantContext, check_placement
from aitenant.controllers.aitenant.gateway_claim import GatewayClaims
from aitenant.controllers.aitenant.rbac import TenantRoles
from aitenant.controllers.aitenant.revocation import RevocationError, Revocations
from aitenant.controllers.finalizers import drop_finalizer, ensure_finalizer
from aitenant.controllers.status import StatusWriter
from aitenant.errors import StepFailed
from aitenant.platform import kinds
from aitenant.platform.cache import PlatformCache
from aitenant.resources import AITenant, AITenantView, MaasTenantConfig
from aitenant.runtime.cache.reads import CachedReads
from aitenant.runtime.client.api_errors import api_message, is_conflict, is_not_found
from aitenant.runtime.client.events import EventRecorder
from aitenant.runtime.client.requests import get_or_none
from aitenant.runtime.control.controller import Done, RequeueAfter, Result, Retry
from aitenant.settings import Settings, format_duration

log = logging.getLogger(__name__)

Reason = contract.Reason
REQUEUE_CONFIG_CLEANUP = 5.0
# While a revocation runs: its end wakes the tenant; this is only the level-triggered fallback.
REQUEUE_REVOCATION = 15.0


class DeletionBlocked(Exception):
    """A cleanup step failed; the status says why and the key is retried with backoff."""


class RevocationPending(Exception):
    """The revocation runs in the background; the pass ends and comes back for its outcome."""


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


class TenantFinalizer:
    def __init__(
        self,
        *,
        client: AsyncClient,
        settings: Settings,
        events: EventRecorder,
        revocations: Revocations,
        reads: CachedReads,
        platform: PlatformCache,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.client = client
        self.reads = reads
        self.platform = platform
        self.settings = settings
        self.events = events
        self.revocations = revocations
        self.now = now
        self.claims = GatewayClaims(
            client=client, reads=reads, namespace=settings.aitenant_namespace
        )
        self.roles = TenantRoles(client=client, reads=reads)

    async def __call__(self, tenant: AITenantView, status: StatusWriter) -> Result:
        try:
            tns = check_placement(tenant, self.settings)
        except StepFailed:
            await self.claims.delete_gateway_claims(tenant)
            await self.remove_finalizer(status)
            return Done()
        ctx = self._context(tenant, tns)
        if self._timed_out(tenant):
            return await self.force_cleanup(ctx, status)

        status.status["tenantNamespace"] = tns
        if conditions.ready_reason(status.status) != Reason.DELETION_BLOCKED:
            # A blocked deletion stays so while it retries (docs/differences.md D28).
            mark_in_progress(status)
        await status.flush()
        try:
            await self.ensure_api_keys_revoked(ctx, status)
            if not await self.delete_tenant_config(ctx):
                mark_in_progress(status)  # past what can block: waiting for the MaaS cleanup
                await status.flush()
                return RequeueAfter(REQUEUE_CONFIG_CLEANUP)
            await self.roles.delete_tenant_rbac(ctx)
            await self.release_tenant_namespace(ctx)
        except RevocationPending:
            return RequeueAfter(REQUEUE_REVOCATION)
        except DeletionBlocked as blocked:
            status.set_phase(contract.PHASE_TERMINATING, Reason.DELETION_BLOCKED, str(blocked))
            await status.flush()
            return Retry(str(blocked))
        await self.delete_gateway_auth_policy(ctx)
        await self.claims.delete_gateway_claims(tenant)
        await self.release_infra_namespace_labels(ctx)
        await self.remove_finalizer(status)
        log.info(
            "aitenant %s/%s: cleanup finished, finalizer removed", tenant.namespace, tenant.name
        )
        return Done()

    def _context(self, tenant: AITenantView, tns: str) -> TenantContext:
        ref = tenant.status.get("gatewayRef") or {}
        if ref.get("namespace") and ref.get("name"):
            gw_ns, gw_name = ref["namespace"], ref["name"]
        else:
            gw_ns, gw_name = naming.gateway_ref_for(tenant.obj, self.settings.gateway_namespace)
        return TenantContext(tenant, tns, gw_ns, gw_name)

    def _timed_out(self, tenant: AITenantView) -> bool:
        timeout = self.settings.deletion_timeout
        stamp = tenant.obj["metadata"].get("deletionTimestamp")
        if timeout <= 0 or not stamp:
            return False
        return (self.now() - parse_time(stamp)).total_seconds() >= timeout

    # -- steps ---------------------------------------------------------------------------------
    async def ensure_api_keys_revoked(self, ctx: TenantContext, status: StatusWriter) -> None:
        # Only the status, which a requester cannot write, says it is done: the reference's
        # api-keys-revoked annotation is theirs to set at create and skips nothing here.
        tenant = ctx.tenant
        cond = conditions.find_condition(status.status, contract.CONDITION_API_KEYS_REVOKED)
        if cond is not None and cond.get("status") == "True":
            return
        url = self.settings.maas_api_url(tenant.name)
        outcome = await self.revocations.outcome((tenant.namespace, tenant.name, tenant.uid, url))
        if outcome is None:
            raise RevocationPending
        if isinstance(outcome, RevocationError):
            raise DeletionBlocked(str(outcome))
        count = outcome
        log.info("aitenant %s/%s: revoked %d API keys", tenant.namespace, tenant.name, count)
        conditions.set_condition(
            status.status,
            type_=contract.CONDITION_API_KEYS_REVOKED,
            state=True,
            reason=Reason.REVOKED,
            message=contract.Message.API_KEYS_REVOKED.format(count=count),
            generation=tenant.generation,
        )
        mark_in_progress(status)  # no longer blocked by the revocation, if it was
        # Recorded at once so that a restart after this point never revokes again.
        await status.flush()

    async def delete_tenant_config(self, ctx: TenantContext) -> bool:
        """True once the config is gone (or not ours); its finalizer does the MaaS cleanup."""
        ns, name = ctx.tenant_namespace, contract.TENANT_CONFIG_NAME
        config = await self.reads.get(MaasTenantConfig, name, ns)
        if config is None:
            return True
        meta = config["metadata"]
        rivals = naming.tenants_for_namespace(ns, self.settings.maas_subscription_namespace)
        if ownership.managed_by_rival(
            meta.get("annotations"), ctx.tenant.name, ctx.tenant.namespace, rivals
        ):
            return True  # not ours: its namespace, not its annotations, says whose it is
        if meta.get("deletionTimestamp"):
            return False
        # Guarantees the MaaS cleanup runs before the config disappears.
        await ensure_finalizer(
            self.client,
            MaasTenantConfig,
            config,
            contract.TENANT_CONFIG_FINALIZER,
            lambda updated: self.reads.remember(MaasTenantConfig, updated),
        )
        try:
            await self.client.delete(MaasTenantConfig, name, namespace=ns)
        except ApiError as exc:
            if is_not_found(exc):
                return True
            raise
        return False

    async def release_tenant_namespace(self, ctx: TenantContext) -> None:
        name = ctx.tenant_namespace
        try:
            ns = await self.reads.get(Namespace, name)
        except ApiError as exc:
            raise DeletionBlocked(
                f'get tenant namespace "{name}" during AITenant deletion: {api_message(exc)}'
            ) from None
        if ns is None:
            return
        meta = ns.metadata or ObjectMeta()
        tenant = ctx.tenant
        if meta.deletionTimestamp or not ownership.owned_by(
            meta.annotations, tenant.name, tenant.namespace
        ):
            return
        ours_labels = {**ctx.labels, **ownership.CREATED_NAMESPACE_LABELS}
        ours_annotations = {**ctx.annotations, **ownership.CREATED_NAMESPACE_ANNOTATIONS}
        patch = ownership.release_patch(
            meta.labels, meta.annotations, ours_labels, ours_annotations
        )
        if patch is None:
            return
        try:
            await self.client.patch(Namespace, name, patch, patch_type=PatchType.MERGE)
        except ApiError as exc:
            raise DeletionBlocked(
                f'release tenant namespace "{name}" during AITenant deletion: {api_message(exc)}'
            ) from None

    async def delete_gateway_auth_policy(self, ctx: TenantContext) -> None:
        name = naming.gateway_auth_policy_name(ctx.tenant.name, ctx.gateway_name)
        holder = await self.claims.held_by_another(ctx)
        if holder is not None:
            # A tenant that lost the Gateway to another (docs/differences.md D27).
            log.info(
                "aitenant %s/%s: keeping AuthPolicy %s/%s: its Gateway is held by AITenant %s/%s",
                ctx.tenant.namespace,
                ctx.tenant.name,
                ctx.gateway_namespace,
                name,
                *holder,
            )
            return
        # Create-only and possibly unlabelled: only a cache of the whole namespace knows.
        policy = await self.platform.read(
            kinds.AUTH_POLICY, ctx.gateway_namespace, name, unlabelled=True
        )
        if policy is None:
            return
        annotations = policy["metadata"].get("annotations") or {}
        if annotations.get(contract.ANNOTATION_OPENDATAHUB_MANAGED) == contract.UNMANAGED_VALUE:
            return
        try:
            await self.client.delete(
                kinds.AUTH_POLICY.resource, name, namespace=ctx.gateway_namespace
            )
        except ApiError as exc:
            if not is_not_found(exc):
                raise

    async def release_infra_namespace_labels(self, ctx: TenantContext) -> None:
        await release_gateway_labels(
            self.client, self.reads, self.claims, self.settings.effective_infra_namespace, ctx
        )

    async def remove_finalizer(self, status: StatusWriter) -> None:
        """Remove our finalizer from the latest copy the pass knows (its status write's answer,
        else the informer's); its resourceVersion guards the list. On a conflict the object is
        read once from the API and the removal tried again."""
        # Rebased on the answer, a pass queued meanwhile (a Role's deletion wakes the tenant)
        # finds the finalizer gone and sends nothing, even before the watch reports the deletion.
        obj = status.obj
        try:
            await drop_finalizer(
                self.client, AITenant, obj, contract.AITENANT_FINALIZER, status.rebase
            )
        except ApiError as exc:
            if not is_conflict(exc):
                raise
            meta = obj["metadata"]
            latest = await get_or_none(self.client, AITenant, meta["name"], meta["namespace"])
            if latest is not None:
                await drop_finalizer(
                    self.client, AITenant, dict(latest), contract.AITENANT_FINALIZER, status.rebase
                )

    # -- deletion timeout ----------------------------------------------------------------------
    async def revoke_once(self, ctx: TenantContext, status: StatusWriter) -> None:
        """The forced path's one try at the keys, unless revoked already; what it could not do
        is a Warning Event (a later tenant of this name revokes them before it is Active)."""
        tenant = ctx.tenant
        cond = conditions.find_condition(status.status, contract.CONDITION_API_KEYS_REVOKED)
        if cond is not None and cond.get("status") == "True":
            return
        outcome = await self.revocations.once(self.settings.maas_api_url(tenant.name))
        if isinstance(outcome, int):
            log.info("aitenant %s/%s: revoked %d API keys", tenant.namespace, tenant.name, outcome)
            return
        await self.events.record(
            tenant.obj,
            "Warning",
            Reason.API_KEYS_NOT_REVOKED_EVENT,
            contract.Message.API_KEYS_NOT_REVOKED_EVENT.format(
                namespace=tenant.namespace, name=tenant.name, error=outcome
            ),
        )

    async def force_cleanup(self, ctx: TenantContext, status: StatusWriter) -> Result:
        tenant = ctx.tenant
        self.revocations.forget(tenant.namespace, tenant.name)
        timeout = format_duration(self.settings.deletion_timeout)
        already_forced = conditions.ready_reason(status.written) == Reason.CLEANUP_FORCED
        status.set_phase(
            contract.PHASE_TERMINATING,
            Reason.CLEANUP_FORCED,
            contract.Message.CLEANUP_FORCED.format(timeout=timeout),
        )
        try:
            await status.flush()
        except ApiError as exc:
            log.warning("aitenant %s: status write during forced cleanup: %s", tenant.name, exc)
        if not already_forced:  # one Event, even when a retry runs this path again
            await self.events.record(
                tenant.obj,
                "Warning",
                Reason.CLEANUP_FORCED_EVENT,
                contract.Message.CLEANUP_FORCED_EVENT.format(
                    timeout=timeout, namespace=tenant.namespace, name=tenant.name
                ),
            )
        await self.revoke_once(ctx, status)
        steps = (
            lambda: self.delete_tenant_config(ctx),
            lambda: self.roles.delete_tenant_rbac(ctx),
            lambda: self.release_tenant_namespace(ctx),
            lambda: self.delete_gateway_auth_policy(ctx),
            lambda: self.claims.delete_gateway_claims(tenant),
            lambda: self.release_infra_namespace_labels(ctx),
        )
        for step in steps:
            try:
                await step()
            except (ApiError, DeletionBlocked, OSError) as exc:
                log.warning("aitenant %s: forced cleanup step failed: %s", tenant.name, exc)
        await self.remove_finalizer(status)
        log.warning(
            "aitenant %s/%s: deletion timeout, finalizer removed", tenant.namespace, tenant.name
        )
        return Done()


async def release_gateway_labels(
    client: AsyncClient,
    reads: CachedReads,
    claims: GatewayClaims,
    infra: str,
    ctx: TenantContext,
) -> None:
    """Take ``ctx``'s Gateway out of the infra namespace's label ledger, and the labels only it
    wanted off the namespace (docs/contract.md §5.1-8); used by a deletion, and by a pass whose
    tenant moved to another Gateway. Only the holder of the Gateway's claim, or a tenant of a
    Gateway no one holds, releases them: a tenant that lost the claim to another (two created
    at once, past the webhook's view) would otherwise take the holder's labels, and with them
    its HTTPRoute's acceptance (docs/differences.md D27)."""
    holder = await claims.held_by_another(ctx)
    if holder is not None:
        log.info(
            "aitenant %s/%s: keeping the infra labels of Gateway %s/%s: held by AITenant %s/%s",
            ctx.tenant.namespace,
            ctx.tenant.name,
            ctx.gateway_namespace,
            ctx.gateway_name,
            *holder,
        )
        return
    ns = await reads.get(Namespace, infra)
    if ns is None:
        return
    meta = ns.metadata or ObjectMeta()
    try:
        patch = infra_labels.plan_release(
            namespace=infra,
            labels=meta.labels,
            annotations=meta.annotations,
            gateway_name=ctx.gateway_name,
        )
    except infra_labels.LabelConflict as exc:
        log.warning("aitenant %s: %s; leaving infra labels alone", ctx.tenant.name, exc)
        return
    if patch is not None:
        patch["metadata"]["resourceVersion"] = meta.resourceVersion
        reads.remember(
            Namespace, await client.patch(Namespace, infra, patch, patch_type=PatchType.MERGE)
        )


def mark_in_progress(status: StatusWriter) -> None:
    status.set_phase(
        contract.PHASE_TERMINATING,
        Reason.DELETION_IN_PROGRESS,
        contract.Message.DELETION_IN_PROGRESS,
    )
