"""What the Gateway exposes and what a tenant admin may ask for, on a real API server: the
route holds maas-api's public API only (docs/differences.md D33), the replicas annotation
stays under the platform's ceiling (docs/differences.md D35), and every status can be written
however long the value a tenant admin wrote (docs/contract.md §3.7).

The tenant admin is a user bound only to the tenant-admin Role the controller creates
(test_tenant_isolation.py). The controller runs with the default ceiling, 3.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from devtools.cluster import LocalCluster
from lightkube import AsyncClient, KubeConfig

from aitenant import contract
from aitenant.platform import kinds

from ..harness import INFRA_NS, TENANT_ADMIN_USER, RunningController, eventually
from ..tenants import Names, get_tenant, make_tenant, ready, wait_phase
from .tenant_platform import config_with_reason, get, get_config
from .test_tenant_isolation import grant_tenant_admin, holds_for, patch_config

pytestmark = pytest.mark.e2e


@pytest.fixture
async def tenant_admin(cluster: LocalCluster) -> AsyncIterator[AsyncClient]:
    """The API as the tenant-admin user (bound per test with ``grant_tenant_admin``)."""
    client = AsyncClient(
        KubeConfig.from_file(cluster.kubeconfig_for(TENANT_ADMIN_USER)),
        field_manager="tenant-admin",
    )
    yield client
    await client.close()


ANNOTATION = contract.ANNOTATION_MAAS_API_REPLICAS

# maas-api's public API as its router declares it at the reference commit, each rule as
# (its matches, its rewrite): the bare paths its clients call, then each under /maas-api
# rewritten back to itself. No /internal/, no /v1/tenants, no catch-all.
EXPECTED_RULES = [
    (
        [("Exact", "/v1/models"), ("Exact", "/v1/subscriptions"), ("PathPrefix", "/v1/api-keys")],
        None,
    ),
    ([("Exact", "/maas-api/health")], ("ReplaceFullPath", "/health")),
    ([("Exact", "/maas-api/v1/models")], ("ReplaceFullPath", "/v1/models")),
    ([("Exact", "/maas-api/v1/subscriptions")], ("ReplaceFullPath", "/v1/subscriptions")),
    ([("PathPrefix", "/maas-api/v1/model")], ("ReplacePrefixMatch", "/v1/model")),
    ([("PathPrefix", "/maas-api/v1/api-keys")], ("ReplacePrefixMatch", "/v1/api-keys")),
]


def rule_shape(rule: dict[str, Any]) -> tuple[list[tuple[str, str]], tuple[str, str] | None]:
    matches = [(m["path"]["type"], m["path"]["value"]) for m in rule["matches"]]
    rewrite = None
    for f in rule.get("filters") or []:
        path = f["urlRewrite"]["path"]
        target = path.get("replaceFullPath") or path.get("replacePrefixMatch")
        rewrite = (path["type"], target)
    return matches, rewrite


async def test_the_gateway_route_holds_maas_apis_public_api_only(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Issue 41 item 1: the route sent /maas-api/internal/v1/tenants/<t>/api-keys to maas-api's
    unauthenticated /internal/. The route the API server stored (its Gateway API schema
    accepted it) has exactly the public matches."""
    name = unique("route")
    await make_tenant(kube, name)

    async def stored() -> dict[str, Any]:
        return await get(kube, kinds.HTTP_ROUTE, f"maas-api-route-{name}", INFRA_NS)

    route = await eventually(stored)
    rules = route["spec"]["rules"]
    assert [rule_shape(r) for r in rules] == EXPECTED_RULES
    for rule in rules:
        assert [b["name"] for b in rule["backendRefs"]] == [f"maas-api-{name}"]
        assert [b["port"] for b in rule["backendRefs"]] == [8443]
    values = [m["path"]["value"] for r in rules for m in r["matches"]]
    assert not [v for v in values if "internal" in v or "tenants" in v or v == "/maas-api"]


async def test_a_tenant_admin_cannot_ask_for_more_replicas_than_the_ceiling(
    kube: AsyncClient, tenant_admin: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Issue 41 item 4: ``maas-api-replicas=10`` from a tenant admin gave 10 replicas. Above
    the ceiling the config says so, naming the annotation, the value and the setting, and
    maas-api keeps the default count."""
    assert controller.settings.maas_api_max_replicas == 3
    name = unique("ceiling")
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    await grant_tenant_admin(kube, name)
    await patch_config(tenant_admin, name, {"annotations": {ANNOTATION: "10"}})

    condition = ready(await config_with_reason(kube, name, "InvalidTenantConfig"))
    assert condition["message"] == (
        f'annotation {ANNOTATION}="10" exceeds the platform\'s limit 3 '
        "(--maas-api-max-replicas / charm option maas-api-max-replicas); maas-api runs the "
        "default 1 (--maas-api-replicas)"
    )

    async def within_the_ceiling() -> None:
        live = await get(kube, kinds.DEPLOYMENT, f"maas-api-{name}", INFRA_NS)
        assert live["spec"]["replicas"] == controller.settings.maas_api_replicas <= 3

    await holds_for(within_the_ceiling, 3)
    # At the ceiling it is applied.
    await patch_config(tenant_admin, name, {"annotations": {ANNOTATION: "3"}})

    async def scaled() -> bool:
        live = await get(kube, kinds.DEPLOYMENT, f"maas-api-{name}", INFRA_NS)
        return bool(live["spec"]["replicas"] == 3)

    await eventually(scaled)


async def test_a_40_kb_annotation_value_is_reported_not_left_ready(
    kube: AsyncClient, tenant_admin: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Issue 41 item 9: the raw value was quoted into the condition message, the status write
    failed with 422 and the config kept Ready=True. Now the status is written, the value
    quoted cut, and the tenant quotes its config's message within its own limit."""
    name = unique("huge")
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    assert ready(await get_config(kube, name))["status"] == "True"
    await grant_tenant_admin(kube, name)
    value = "9" * 40_000
    await patch_config(tenant_admin, name, {"annotations": {ANNOTATION: value}})

    condition = ready(await config_with_reason(kube, name, "InvalidTenantConfig"))
    assert condition["status"] == "False"
    message = condition["message"]
    assert len(message) <= contract.CONDITION_MESSAGE_MAX
    assert message.startswith(f'annotation {ANNOTATION}="{value[:64]}…" (40000 characters) ')

    async def tenant_says_so() -> dict[str, Any] | None:
        cond = ready(await get_tenant(kube, name))
        return cond if cond.get("reason") == "TenantConfigNotReady" else None

    said = await eventually(tenant_says_so)
    assert "(40000 characters)" in said["message"]
    assert len(said["message"]) <= contract.CONDITION_MESSAGE_MAX
