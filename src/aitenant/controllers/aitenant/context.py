"""Where an AITenant may live and what one pass derives from it: shared by the create path
(``reconciler.py``) and deletion (``deletion.py``), and handed to each step module."""

from __future__ import annotations

from dataclasses import dataclass

from aitenant import contract, naming
from aitenant.controllers import ownership
from aitenant.errors import StepFailed
from aitenant.resources import AITenantView, Obj
from aitenant.settings import Settings

Reason = contract.Reason


def check_placement(tenant: AITenantView, settings: Settings) -> str:
    """The derived tenant namespace, or StepFailed(InvalidPlacement) (docs/contract.md §3.4)."""
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
