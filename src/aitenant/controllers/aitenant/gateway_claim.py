"""Gateway claims: one ConfigMap per Gateway in the AITenant namespace, owned by the one
AITenant that uses that Gateway (docs/contract.md §3.4, step 10), so that no two tenants share one.

The create path calls ``ensure_gateway_claim``: the claim is created, or checked to be this
tenant's and for this Gateway, and every other claim the tenant owns is deleted. Deletion calls
``delete_gateway_claims`` for every claim the tenant owns. The claims are read from their
informer, indexed by owner (``CLAIM_OWNER_INDEX``, added by ``setup.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import ConfigMap

from aitenant import contract, naming
from aitenant.controllers import ownership
from aitenant.controllers.aitenant.context import TenantContext
from aitenant.errors import StepFailed
from aitenant.resources import AITenantView, Obj
from aitenant.runtime.cache.reads import CachedReads
from aitenant.runtime.client.api_errors import already_exists, is_not_found

Reason = contract.Reason

CLAIM_OWNER_INDEX = "claim-owner"


def claim_owner_names(obj: Obj) -> list[str]:
    """Index of claim ConfigMaps: every AITenant name ``claim_owned_by`` may find in one (its
    controller ownerReference, its owner annotation)."""
    meta = obj.get("metadata") or {}
    names = {
        ref.get("name")
        for ref in meta.get("ownerReferences") or []
        if ref.get("controller") and ref.get("kind") == "AITenant"
    }
    names.add((meta.get("annotations") or {}).get(contract.ANNOTATION_AITENANT_NAME))
    return sorted(name for name in names if name)


@dataclass(frozen=True, kw_only=True)
class GatewayClaims:
    """One tenant's claims, for the create path and for deletion."""

    client: AsyncClient
    reads: CachedReads
    # The AITenant namespace: the claims live beside the AITenants.
    namespace: str

    async def ensure_gateway_claim(self, ctx: TenantContext) -> None:
        """This tenant's claim on its Gateway → GatewayClaimFailed (an API error: retried)."""
        try:
            await self._ensure(ctx)
        except ApiError as exc:
            raise StepFailed.from_api(Reason.GATEWAY_CLAIM_FAILED, exc) from None

    async def _ensure(self, ctx: TenantContext) -> None:
        tenant = ctx.tenant
        ns = self.namespace
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
                    labels=ownership.created_labels(
                        {
                            contract.LABEL_MANAGED_BY: contract.MANAGED_BY_VALUE,
                            contract.LABEL_GATEWAY_CLAIM: "true",
                            contract.LABEL_MANAGED_BY_AITENANT: "true",
                        }
                    ),
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
            await self._check_existing(ctx, claim, owner)
        await self.delete_gateway_claims(tenant, keep=name)

    async def _check_existing(
        self, ctx: TenantContext, claim: ConfigMap, owner: OwnerReference
    ) -> None:
        tenant = ctx.tenant
        meta = claim.metadata or ObjectMeta()
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
                f"claim {self.namespace}/{meta.name} already exists for gateway "
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

    async def held_by_another(self, ctx: TenantContext) -> tuple[str, str] | None:
        """The AITenant (namespace, name) other than ``ctx``'s that holds the claim on ctx's
        Gateway; None when this tenant holds it or no one does."""
        name = naming.claim_name(ctx.gateway_namespace, ctx.gateway_name)
        claim = await self.reads.get(ConfigMap, name, self.namespace)
        if claim is None:
            return None
        meta = claim.metadata or ObjectMeta()
        if claim_owned_by(meta, ctx.tenant):
            return None
        return claim_owner(meta)

    async def delete_gateway_claims(self, tenant: AITenantView, *, keep: str | None = None) -> None:
        """Delete every claim ``tenant`` owns but ``keep`` (already gone is fine)."""
        claims = await self.reads.list(
            ConfigMap,
            namespace=self.namespace,
            labels={contract.LABEL_GATEWAY_CLAIM: "true"},
            index=(CLAIM_OWNER_INDEX, tenant.name),  # not every claim: this tenant's
        )
        for claim in claims:
            meta = claim.metadata or ObjectMeta()
            if meta.name == keep or not claim_owned_by(meta, tenant):
                continue
            try:
                await self.client.delete(ConfigMap, meta.name or "", namespace=self.namespace)
            except ApiError as exc:
                if not is_not_found(exc):
                    raise


def claim_owned_by(meta: ObjectMeta, tenant: AITenantView) -> bool:
    """Who owns a claim: the controller ownerRef first, annotations as fallback."""
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
