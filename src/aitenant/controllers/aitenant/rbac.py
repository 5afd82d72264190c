"""The tenant's RBAC: two Roles with the contract's rules (docs/contract.md §3.4, step 13),
named after the tenant, one in its tenant namespace and one beside the AITenant.
RoleBindings are the administrators' job.

The create path calls ``ensure_tenant_admin_roles``: each Role is
created, or has its rules and our labels restored. Deletion calls ``delete_tenant_rbac``: the
Roles and the RoleBindings older controllers made, each only when this tenant owns it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding
from lightkube.types import PatchType

from aitenant import contract, naming
from aitenant.controllers import ownership
from aitenant.controllers.aitenant.context import TenantContext
from aitenant.errors import StepFailed
from aitenant.resources import AITenantView
from aitenant.runtime.cache.reads import CachedReads
from aitenant.runtime.client.api_errors import already_exists, is_not_found

Reason = contract.Reason


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


@dataclass(frozen=True, kw_only=True)
class TenantRoles:
    """One tenant's Roles, for the create path and for deletion."""

    client: AsyncClient
    # Roles from their informer (our label); legacy RoleBindings from the API.
    reads: CachedReads

    async def ensure_tenant_admin_roles(self, ctx: TenantContext) -> None:
        """Both Roles → RBACReconcileFailed (an API error: retried)."""
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
            return StepFailed.from_api(Reason.RBAC_RECONCILE_FAILED, exc, f"{what} {ref}")

        try:
            role = await self.reads.get(Role, name, namespace)
        except ApiError as exc:
            raise failed("get", exc) from None
        if role is None:
            body = Role(
                metadata=ObjectMeta(
                    name=name,
                    namespace=namespace,
                    labels=ownership.created_labels(ctx.labels),
                    annotations=ctx.annotations,
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

    async def delete_tenant_rbac(self, ctx: TenantContext) -> None:
        """The Roles and legacy RoleBindings of both names that this tenant owns."""
        tenant = ctx.tenant
        admin = naming.tenant_admin_role_name(tenant.name)
        object_admin = naming.object_admin_role_name(tenant.name)
        for kind, name, namespace in (
            (RoleBinding, admin, ctx.tenant_namespace),
            (Role, admin, ctx.tenant_namespace),
            (RoleBinding, object_admin, tenant.namespace),
            (Role, object_admin, tenant.namespace),
        ):
            await self._delete_if_owned(kind, name, namespace, tenant)

    async def _delete_if_owned(
        self, kind: Any, name: str, namespace: str, tenant: AITenantView
    ) -> None:
        obj = await self.reads.get(kind, name, namespace)
        if obj is None:
            return
        meta = obj.metadata or ObjectMeta()
        if not ownership.owned_by(meta.annotations, tenant.name, tenant.namespace):
            return  # a user's object that happens to carry the name
        try:
            await self.client.delete(kind, name, namespace=namespace)
        except ApiError as exc:
            if not is_not_found(exc):
                raise
