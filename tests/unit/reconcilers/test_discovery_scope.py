"""Which MaasTenantConfigs the MaasTenantConfig reconciler serves (docs/contract.md §3.6, §7).

With ``--enable-tenant-namespace-discovery`` every AITenant-managed config (label
``maas.opendatahub.io/managed-by-aitenant=true``) is served, in any namespace; without it only
``default-tenant`` in ``--maas-subscription-namespace``. A config without the label is never
served: it has no owning AITenant to take a Gateway from, and outside the subscription namespace
it would render the default tenant's unsuffixed names.
"""

from __future__ import annotations

from typing import Any

import pytest

from aitenant import contract
from aitenant.reconcilers.tenant_config import in_scope
from aitenant.settings import Settings

MANAGED = {contract.LABEL_MANAGED_BY_AITENANT: "true"}


def config(namespace: str, name: str = "default-tenant", labels: Any = MANAGED) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}}


@pytest.mark.parametrize(
    ("obj", "discovery", "served"),
    [
        (config("models-as-a-service"), False, True),
        (config("models-as-a-service"), True, True),
        (config("ai-tenant-red"), False, False),
        (config("ai-tenant-red"), True, True),
        (config("models-as-a-service", name="other"), False, False),
        (config("ai-tenant-red", name="other"), True, True),
        (config("models-as-a-service", labels={}), False, False),
        (config("ai-tenant-red", labels={}), True, False),
        (
            config("ai-tenant-red", labels={contract.LABEL_MANAGED_BY_AITENANT: "false"}),
            True,
            False,
        ),
    ],
)
def test_scope(obj: dict[str, Any], discovery: bool, served: bool) -> None:
    settings = Settings(enable_tenant_namespace_discovery=discovery)
    assert in_scope(obj, settings) is served
