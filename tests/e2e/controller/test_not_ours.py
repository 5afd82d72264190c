"""What is not a tenant's is never taken from anyone by it: objects someone else made, the
Gateway labels of the tenant that holds the Gateway, and API keys a requester would keep alive
(issue 41, "What to build" 5 to 7; docs/differences.md D32, docs/contract.md §5.2).

The controller here runs without the admission webhook, as a cluster does before the webhook
exists, so two AITenants created at once may name one Gateway: the race the webhook's lagging
view lets through.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from devtools import samples
from devtools.maas_api import FakeMaasApi
from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from aitenant import contract
from aitenant.platform import kinds
from aitenant.resources import AITenant

from ..harness import AITENANT_NS, GATEWAY_NS, INFRA_NS, RunningController, eventually
from ..tenants import Names, get_tenant, make_tenant, ready, wait_phase
from .tenant_platform import config_with_reason, get

pytestmark = pytest.mark.e2e


async def wait_gone(kube: AsyncClient, name: str, timeout: float = 30) -> None:
    async def gone() -> bool:
        try:
            await get_tenant(kube, name)
        except ApiError as exc:
            return exc.status.code == 404
        return False

    await eventually(gone, timeout=timeout)


async def holds_for(check: Callable[[], Awaitable[None]], seconds: float) -> None:
    """``check`` passes at every look for ``seconds``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        await check()
        await asyncio.sleep(0.1)


def database_service(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A Service of someone else's database that happens to have a tenant's maas-api name."""
    metadata: dict[str, Any] = {"name": name, "namespace": INFRA_NS}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"selector": {"app": "db"}, "ports": [{"name": "postgres", "port": 5432}]},
    }


async def test_objects_we_did_not_make_are_reported_left_and_outlive_the_tenant(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Two Services with tenants' maas-api names exist before the tenants: one without any
    label of ours, one also annotated ``opendatahub.io/managed: "false"``. Each tenant's config
    names its Service and who made it; neither Service is written, and both are still there,
    unchanged, once the tenants are deleted."""
    plain, kept = unique("inway"), unique("keptdb")
    services = {
        plain: database_service(f"maas-api-{plain}"),
        kept: database_service(
            f"maas-api-{kept}",
            {contract.ANNOTATION_OPENDATAHUB_MANAGED: contract.UNMANAGED_VALUE},
        ),
    }
    versions: dict[str, str] = {}
    for tenant, body in services.items():
        made = await kube.patch(
            kinds.SERVICE.resource,
            body["metadata"]["name"],
            body,
            namespace=INFRA_NS,
            patch_type=PatchType.APPLY,
            field_manager="db-chart",
        )
        versions[tenant] = made["metadata"]["resourceVersion"]
    for tenant in services:
        await make_tenant(kube, tenant)

    for tenant, also in ((plain, ""), (kept, " and annotated to be kept")):
        condition = ready(await config_with_reason(kube, tenant, "ApplyFailed"))
        assert condition["message"] == (
            f"Service {INFRA_NS}/maas-api-{tenant} is in the way: it exists, made by "
            f"db-chart{also}, without {contract.LABEL_TENANT_NAME}={tenant}, and is not taken "
            "over; rename or delete it and the platform is applied"
        )

    async def untouched() -> None:
        for tenant, body in services.items():
            live = await get(kube, kinds.SERVICE, body["metadata"]["name"], INFRA_NS)
            assert live["metadata"]["resourceVersion"] == versions[tenant], live["metadata"]
            assert live["spec"]["selector"] == {"app": "db"}
            assert [p["port"] for p in live["spec"]["ports"]] == [5432]
            assert contract.LABEL_TENANT_NAME not in (live["metadata"].get("labels") or {})

    await holds_for(untouched, 1.5)
    for tenant in services:
        await kube.delete(AITenant, tenant, namespace=AITENANT_NS)
    for tenant in services:
        await wait_gone(kube, tenant)
    await untouched()
    for body in services.values():
        await kube.delete(kinds.SERVICE.resource, body["metadata"]["name"], namespace=INFRA_NS)


async def infra_labels(kube: AsyncClient) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The infra namespace's labels and its ledger of which Gateways want which label."""
    ns = await kube.get(Namespace, INFRA_NS)
    assert ns.metadata is not None
    ledger = (ns.metadata.annotations or {}).get(contract.ANNOTATION_GATEWAY_SELECTOR_LABELS)
    return dict(ns.metadata.labels or {}), json.loads(ledger or "{}")


async def test_the_loser_of_a_gateway_race_leaves_the_holders_labels(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Two AITenants created at once on one Gateway: one holds its claim (Active), the other
    fails it. Deleting the one that failed leaves the holder's label on the infra namespace,
    which the Gateway's listener selects routes by, so the holder's HTTPRoute stays attached."""
    first, second, gateway = unique("race-a"), unique("race-b"), unique("raced")
    key = f"example.com/{gateway}"
    await samples.create_gateway(kube, samples.gateway(gateway, GATEWAY_NS, selector={key: "yes"}))
    await asyncio.gather(
        *(
            samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS, gateway_name=gateway))
            for name in (first, second)
        )
    )

    async def settled() -> dict[str, str] | None:
        phases = {
            name: ((await get_tenant(kube, name)).get("status") or {}).get("phase", "")
            for name in (first, second)
        }
        return phases if sorted(phases.values()) == ["Active", "Failed"] else None

    phases = await eventually(settled, timeout=60)
    holder = next(name for name, phase in phases.items() if phase == "Active")
    loser = next(name for name, phase in phases.items() if phase == "Failed")
    assert ready(await get_tenant(kube, loser))["reason"] == "GatewayClaimFailed"
    labels, ledger = await infra_labels(kube)
    assert labels.get(key) == "yes"
    assert gateway in ledger.get(key, [])

    await kube.delete(AITenant, loser, namespace=AITENANT_NS)
    await wait_gone(kube, loser)

    async def holders_route_still_selected() -> None:
        labels, ledger = await infra_labels(kube)
        assert labels.get(key) == "yes", labels
        assert gateway in ledger.get(key, []), ledger
        route = await get(kube, kinds.HTTP_ROUTE, f"maas-api-route-{holder}", INFRA_NS)
        assert route["spec"]["parentRefs"][0]["name"] == gateway
        assert (await get_tenant(kube, holder))["status"]["phase"] == "Active"

    await holds_for(holders_route_still_selected, 1.5)
    await kube.delete(AITenant, holder, namespace=AITENANT_NS)
    await wait_gone(kube, holder)
    labels, _ = await infra_labels(kube)
    assert key not in labels, "the holder releases them"


async def test_a_revoked_annotation_a_requester_writes_skips_no_revocation(
    kube: AsyncClient, controller: RunningController, maas_api: FakeMaasApi, unique: Names
) -> None:
    """``api-keys-revoked: "true"`` set by whoever created the AITenant: its keys are revoked
    at its deletion all the same."""
    name = unique("annotated")
    await samples.create_gateway(kube, samples.gateway(name, GATEWAY_NS))
    body = samples.aitenant(name, AITENANT_NS)
    body["metadata"]["annotations"] = {contract.ANNOTATION_API_KEYS_REVOKED: "true"}
    await samples.create_aitenant(kube, body)
    await wait_phase(kube, name, "Active")
    maas_api.keys[name] = 2  # minted while it is Active
    await kube.delete(AITenant, name, namespace=AITENANT_NS)
    await wait_gone(kube, name)
    assert maas_api.revocations(name) == [0, 2], "at provisioning (none left), at deletion"
    assert maas_api.keys[name] == 0


async def test_a_tenant_revokes_what_its_name_left_before_it_is_active(
    kube: AsyncClient, controller: RunningController, maas_api: FakeMaasApi, unique: Names
) -> None:
    """Keys left in maas-api's database under a name (a forced deletion, a failed revocation)
    are revoked by the next tenant of that name before it is Active: while maas-api does not
    answer, the tenant stays Pending. Recreated, it revokes again."""
    name = unique("again")
    maas_api.keys[name] = 5  # left by an earlier tenant of this name
    maas_api.hold([name])
    try:
        await make_tenant(kube, name)
        await wait_phase(kube, name, "Pending", "RevokingStaleAPIKeys")

        async def still_pending() -> None:
            obj = await get_tenant(kube, name)
            assert obj["status"]["phase"] == "Pending", obj["status"]

        await holds_for(still_pending, 1.5)
    finally:
        maas_api.release([name])
    obj = await wait_phase(kube, name, "Active")
    conds = {c["type"]: c for c in obj["status"]["conditions"]}
    assert conds["StaleAPIKeysRevoked"]["status"] == "True"
    assert conds["StaleAPIKeysRevoked"]["message"] == (
        "API keys left under this tenant's name were revoked before it was first Active "
        "(revokedCount=5)"
    )
    assert maas_api.revocations(name) == [5]

    await kube.delete(AITenant, name, namespace=AITENANT_NS)
    await wait_gone(kube, name)
    maas_api.keys[name] = 4  # as if its deletion had been forced past a failing maas-api
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    assert maas_api.revocations(name) == [5, 0, 4]
    assert maas_api.keys[name] == 0
