"""API resource classes (declared once) and typed views of the objects the controller reads.

Objects travel as the plain dicts the API server sent; ``AITenantView`` parses the parts of an
AITenant the reconciler decides on, so a typo in a key fails loudly here rather than silently
downstream.
"""

from __future__ import annotations

from typing import Any

from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from aitenant import contract

AITenant = create_namespaced_resource(contract.GROUP, contract.VERSION, "AITenant", "aitenants")
MaasTenantConfig = create_namespaced_resource(
    contract.GROUP, contract.VERSION, "MaasTenantConfig", "maastenantconfigs"
)
LegacyTenant = create_namespaced_resource(contract.GROUP, contract.VERSION, "Tenant", "tenants")
Config = create_global_resource(contract.GROUP, contract.VERSION, "Config", "configs")
Gateway = create_namespaced_resource("gateway.networking.k8s.io", "v1", "Gateway", "gateways")
MaaSSubscription = create_namespaced_resource(
    contract.GROUP, contract.VERSION, "MaaSSubscription", "maassubscriptions"
)
MaaSAuthPolicy = create_namespaced_resource(
    contract.GROUP, contract.VERSION, "MaaSAuthPolicy", "maasauthpolicies"
)

Obj = dict[str, Any]


class AITenantView:
    """Read-only typed access to an AITenant dict."""

    def __init__(self, obj: Obj) -> None:
        self.obj = obj
        meta = obj["metadata"]
        self.name: str = meta["name"]
        self.namespace: str = meta.get("namespace", "")
        self.uid: str = meta.get("uid", "")
        self.generation: int = int(meta.get("generation", 0))
        self.deleting: bool = bool(meta.get("deletionTimestamp"))
        self.finalizers: list[str] = list(meta.get("finalizers") or [])
        self.annotations: dict[str, str] = dict(meta.get("annotations") or {})
        self.status: Obj = dict(obj.get("status") or {})

    @property
    def is_default(self) -> bool:
        return self.name == contract.DEFAULT_TENANT_NAME


def labels_of(obj: Obj) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("labels") or {})


def annotations_of(obj: Obj) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("annotations") or {})
