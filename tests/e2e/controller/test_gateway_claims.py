"""Which Gateway an AITenant uses, against a real API server (docs/contract.md §3).

An explicit Gateway name, a Gateway created after its tenant, one tenant per Gateway (the claim
ConfigMap), moving a tenant to another Gateway, and the Gateway's selector labels on the infra
namespace, added and released.
"""

from __future__ import annotations

import pytest
from devtools import samples
from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import ConfigMap, Event, Namespace
from lightkube.types import PatchType

from aitenant import naming
from aitenant.resources import AITenant
from aitenant.runtime.control.controller import Key, Retry

from ..harness import AITENANT_NS, GATEWAY_NS, INFRA_NS, RunningController, eventually
from ..tenants import Names, get_tenant, make_tenant, ready, wait_phase

pytestmark = pytest.mark.e2e


async def test_explicit_gateway_name(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name, gw = unique("explicit"), unique("shared-gw")
    await make_tenant(kube, name, gateway_name=gw)
    obj = await wait_phase(kube, name, "Active")
    assert obj["status"]["gatewayRef"] == {"name": gw, "namespace": GATEWAY_NS}
    claim = await kube.get(ConfigMap, naming.claim_name(GATEWAY_NS, gw), namespace=AITENANT_NS)
    assert claim.data == {"gatewayNamespace": GATEWAY_NS, "gatewayName": gw}


async def test_missing_gateway_then_created_becomes_active_by_itself(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("late-gw")
    await samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS))
    obj = await wait_phase(kube, name, "Failed", "GatewayCheckFailed")
    assert ready(obj)["message"] == (
        f"gateway {GATEWAY_NS}/{name} not found: the Gateway must be created by a network or "
        "cluster administrator before AITenant can be provisioned"
    )
    assert obj["status"]["gatewayRef"] == {"name": name, "namespace": GATEWAY_NS}
    # Nothing was created for a non-default tenant before the Gateway check.
    with pytest.raises(ApiError):
        await kube.get(Namespace, f"ai-tenant-{name}")

    async def warning_event() -> bool:
        got = [
            (e.type, e.reason)
            async for e in kube.list(
                Event, namespace=AITENANT_NS, fields={"involvedObject.name": name}
            )
        ]
        return ("Warning", "GatewayCheckFailed") in got

    await eventually(warning_event)

    await samples.create_gateway(kube, samples.gateway(name, GATEWAY_NS))
    # Well inside the 30 s requeue: the Gateway watch brings the tenant back (it then waits
    # for its maas-api pod, whose start is not the watch's to speed up).
    await wait_phase(kube, name, "Pending", "TenantConfigNotReady", timeout=10)
    await wait_phase(kube, name, "Active")


async def test_claim_conflict_between_two_tenants(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    first, second, gw = unique("claim-a"), unique("claim-b"), unique("contested")
    await make_tenant(kube, first, gateway_name=gw)
    await wait_phase(kube, first, "Active")
    await samples.create_aitenant(kube, samples.aitenant(second, AITENANT_NS, gateway_name=gw))
    obj = await wait_phase(kube, second, "Failed", "GatewayClaimFailed")
    assert ready(obj)["message"] == (
        f"gateway {GATEWAY_NS}/{gw} is already claimed by AITenant {AITENANT_NS}/{first}; "
        "each AITenant requires a dedicated Gateway for isolation"
    )
    with pytest.raises(ApiError):
        await kube.get(Namespace, f"ai-tenant-{second}")
    # The first one going releases its claim, and that wakes the second at once (not at its
    # next 30 s retry).
    await kube.delete(AITenant, first, namespace=AITENANT_NS)
    await wait_phase(kube, second, "Active")

    async def first_gone() -> bool:
        try:
            await get_tenant(kube, first)
        except ApiError as exc:
            return exc.status.code == 404
        return False

    await eventually(first_gone, timeout=20)


async def test_gateway_retarget_moves_the_claim(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name, old_gw, new_gw = unique("retarget"), unique("gw-old"), unique("gw-new")
    await make_tenant(kube, name, gateway_name=old_gw)
    await wait_phase(kube, name, "Active")
    await samples.create_gateway(kube, samples.gateway(new_gw, GATEWAY_NS))
    await kube.patch(
        AITenant,
        name,
        {"spec": {"gateway": {"name": new_gw}}},
        namespace=AITENANT_NS,
        patch_type=PatchType.MERGE,
    )

    async def moved() -> bool:
        obj = await get_tenant(kube, name)
        assert obj["status"]["gatewayRef"]["name"] == new_gw
        assert ready(obj)["observedGeneration"] == obj["metadata"]["generation"]
        await kube.get(ConfigMap, naming.claim_name(GATEWAY_NS, new_gw), namespace=AITENANT_NS)
        try:
            await kube.get(ConfigMap, naming.claim_name(GATEWAY_NS, old_gw), namespace=AITENANT_NS)
        except ApiError as exc:
            return exc.status.code == 404
        return False

    await eventually(moved)


async def test_infra_namespace_gets_gateway_selector_labels(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("selector")
    key = f"example.com/{name}"
    await samples.create_gateway(kube, samples.gateway(name, GATEWAY_NS, selector={key: "yes"}))
    await samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS))
    await wait_phase(kube, name, "Active")
    ns = await kube.get(Namespace, INFRA_NS)
    assert ns.metadata is not None
    assert (ns.metadata.labels or {})[key] == "yes"
    ledger = (ns.metadata.annotations or {})["maas.opendatahub.io/gateway-selector-labels"]
    assert f'"{key}":["{name}"]' in ledger
    await kube.delete(AITenant, name, namespace=AITENANT_NS)

    async def released() -> bool:
        ns = await kube.get(Namespace, INFRA_NS)
        assert ns.metadata is not None
        return key not in (ns.metadata.labels or {})

    await eventually(released)
    # Both label writes answer with the typed Namespace; no pass may fail on it (it used to,
    # healed by the retry: 'Namespace' object is not subscriptable).
    key_of_tenant = Key(AITENANT_NS, name)
    assert [exc for k, exc in controller.raised if k == key_of_tenant] == []
    assert [r for k, r in controller.results if k == key_of_tenant and isinstance(r, Retry)] == []
