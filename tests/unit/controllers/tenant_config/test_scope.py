"""Which MaasTenantConfigs the MaasTenantConfig reconciler serves (docs/contract.md §3.6, §7).

With ``--enable-tenant-namespace-discovery`` every AITenant-managed config (label
``maas.opendatahub.io/managed-by-aitenant=true``) is served, in any namespace; without it only
``default-tenant`` in ``--maas-subscription-namespace``. A config without the label is never
served: it has no owning AITenant to take a Gateway from, and outside the subscription namespace
it would render the default tenant's unsuffixed names. A config not named ``default-tenant`` is
never served, whatever its labels.
"""

from __future__ import annotations

from typing import Any

import pytest

from aitenant import contract
from aitenant.controllers.tenant_config.scope import has_leftover_finalizer, in_scope, wanted
from aitenant.settings import Settings

MANAGED = {contract.LABEL_MANAGED_BY_AITENANT: "true"}


FINALIZER = contract.TENANT_CONFIG_FINALIZER


def config(
    namespace: str,
    name: str = "default-tenant",
    labels: Any = MANAGED,
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "labels": labels, "finalizers": finalizers}
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("obj", "discovery", "served"),
    [
        (config("models-as-a-service"), False, True),
        (config("models-as-a-service"), True, True),
        (config("ai-tenant-red"), False, False),
        (config("ai-tenant-red"), True, True),
        (config("models-as-a-service", name="other"), False, False),
        (config("ai-tenant-red", name="other"), True, False),
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


@pytest.mark.parametrize(
    ("obj", "discovery", "stripped"),
    [
        # Not default-tenant: never a tenant's config, in any namespace, labelled or not.
        (config("ai-tenant-red", name="extra", finalizers=[FINALIZER]), True, True),
        (config("ai-tenant-red", name="extra", finalizers=[FINALIZER]), False, True),
        (config("models-as-a-service", name="x", labels={}, finalizers=[FINALIZER]), False, True),
        # Unlabelled default-tenant in the subscription namespace (upstream strips it).
        (config("models-as-a-service", labels={}, finalizers=[FINALIZER]), False, True),
        (config("models-as-a-service", labels={}, finalizers=[FINALIZER]), True, True),
        # A served config keeps it; so does one outside the scope that upstream leaves alone.
        (config("models-as-a-service", finalizers=[FINALIZER]), False, False),
        (config("ai-tenant-red", finalizers=[FINALIZER]), False, False),
        (config("ai-tenant-red", labels={}, finalizers=[FINALIZER]), True, False),
        # Nothing to strip.
        (config("ai-tenant-red", name="extra", finalizers=["someone/else"]), True, False),
        (config("models-as-a-service", labels={}), False, False),
    ],
)
def test_leftover_finalizer(obj: dict[str, Any], discovery: bool, stripped: bool) -> None:
    settings = Settings(enable_tenant_namespace_discovery=discovery)
    assert has_leftover_finalizer(obj, settings) is stripped
    assert wanted(obj, settings) is (stripped or in_scope(obj, settings))
