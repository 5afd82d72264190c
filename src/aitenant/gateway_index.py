"""The AITenants using a Gateway, from an index of the AITenant informer: asked by both
controllers' Gateway handlers and by the admission webhook's uniqueness rule
(docs/differences.md D3)."""

from __future__ import annotations

from aitenant import naming
from aitenant.runtime.cache.informer import Informer

GATEWAY_INDEX = "gateway"


def gateway_index_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


class TenantsByGateway:
    """The read side of the ``gateway`` index of the AITenant informer."""

    def __init__(self, tenants: Informer) -> None:
        self.tenants = tenants

    def has_synced(self) -> bool:
        """True once the AITenant informer has completed its first list."""
        return self.tenants.synced.is_set()

    def tenants_for_gateway(self, namespace: str, name: str) -> list[tuple[str, str]]:
        """(namespace, name) of every cached AITenant using this Gateway, deleting ones too."""
        return [
            (o["metadata"]["namespace"], o["metadata"]["name"])
            for o in self.tenants.by_index(GATEWAY_INDEX, gateway_index_key(namespace, name))
        ]


def index_by_gateway(tenants: Informer, gateway_namespace: str) -> TenantsByGateway:
    """Add the ``gateway`` index to the AITenant informer (before it starts)."""
    tenants.add_index(
        GATEWAY_INDEX,
        lambda o: [gateway_index_key(*naming.gateway_ref_for(o, gateway_namespace))],
    )
    return TenantsByGateway(tenants)
