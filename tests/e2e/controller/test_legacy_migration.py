"""Migration from legacy Tenant objects against a real API server (docs/contract.md §6)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from devtools import samples
from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from aitenant import contract
from aitenant.resources import AITenant, LegacyTenant, MaasTenantConfig
from aitenant.runtime.control.controller import Key

from ..harness import AITENANT_NS, GATEWAY_NS, RunningController, eventually
from ..tenants import Names, get_tenant, ready, wait_phase

pytestmark = pytest.mark.e2e

MIGRATED = {
    "maas.opendatahub.io/deprecated-by": "MaasTenantConfig",
    "maas.opendatahub.io/migrated-to": "default-tenant",
}


def oidc_for(name: str) -> dict[str, Any]:
    return {"issuerUrl": f"https://idp.example.com/realms/{name}", "clientId": name, "ttl": 120}


async def create_legacy(
    kube: AsyncClient,
    namespace: str,
    spec: dict[str, Any],
    *,
    name: str = "default-tenant",
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": contract.API_VERSION,
        "kind": "Tenant",
        "metadata": {"name": name, "namespace": namespace, "finalizers": finalizers or []},
        "spec": spec,
    }
    return dict(await kube.create(LegacyTenant.from_dict(body)))


async def get_legacy(
    kube: AsyncClient, namespace: str, name: str = "default-tenant"
) -> dict[str, Any] | None:
    try:
        return dict(await kube.get(LegacyTenant, name, namespace=namespace))
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise


async def get_config(kube: AsyncClient, namespace: str) -> dict[str, Any]:
    return dict(await kube.get(MaasTenantConfig, "default-tenant", namespace=namespace))


async def prepare(kube: AsyncClient, name: str, gateway: str) -> str:
    """The tenant namespace a legacy installation already has, and the tenant's Gateway."""
    tns = f"ai-tenant-{name}"
    await samples.ensure_namespace(kube, tns)
    await samples.create_gateway(kube, samples.gateway(gateway, GATEWAY_NS))
    return tns


@pytest.fixture
async def legacy_tenants_named_freely(kube: AsyncClient) -> AsyncIterator[None]:
    """A Tenant not named default-tenant exists only where the CRD's name rule came after it."""
    async with samples.without_name_rule(kube, LegacyTenant):
        yield


@pytest.mark.usefixtures("legacy_tenants_named_freely")
async def test_legacy_tenant_is_migrated_and_removed(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("legacy")
    gateway = f"{name}-gw"
    tns = await prepare(kube, name, gateway)
    telemetry = {"enabled": True, "metrics": {"captureOrganization": True}}
    await create_legacy(
        kube,
        tns,
        {
            "gatewayRef": {"namespace": GATEWAY_NS, "name": gateway},
            "externalOIDC": oidc_for(name),
            "apiKeys": {"maxExpirationDays": 30},
            "telemetry": telemetry,
            "payloadProcessing": {"replicas": 2},
        },
        # Left behind by an old controller; nothing else would ever remove it.
        finalizers=["maas.opendatahub.io/tenant-cleanup"],
    )
    unrelated = await create_legacy(
        kube, tns, {"apiKeys": {"maxExpirationDays": 5}}, name="unrelated"
    )

    # The AITenant is applied with no spec at all, as scripts/create-ai-tenant.sh does.
    await samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS))
    obj = await wait_phase(kube, name, "Active")

    assert obj["spec"]["gateway"] == {"name": gateway}
    assert obj["spec"]["oidc"] == oidc_for(name)
    assert obj["status"]["gatewayRef"] == {"name": gateway, "namespace": GATEWAY_NS}
    assert ready(obj)["observedGeneration"] == obj["metadata"]["generation"]

    spec = (await get_config(kube, tns))["spec"]
    assert spec["apiKeys"] == {"maxExpirationDays": 30}
    # Copied as stored: the Tenant's schema filled in the dimensions' defaults.
    assert spec["telemetry"] == {
        "enabled": True,
        "metrics": {
            "captureOrganization": True,
            "captureModelUsage": True,
            "captureGroup": False,
            "captureUser": False,
        },
    }
    # Platform context stays in the AITenant; payloadProcessing is not migrated.
    assert not {"gatewayRef", "externalOIDC", "payloadProcessing"} & spec.keys()

    assert await get_legacy(kube, tns) is None
    after = await get_legacy(kube, tns, "unrelated")
    assert after is not None
    assert after["metadata"]["resourceVersion"] == unrelated["metadata"]["resourceVersion"]


async def test_config_edited_by_an_admin_keeps_the_legacy_tenant(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("edited")
    gateway = f"{name}-gw"
    tns = await prepare(kube, name, gateway)
    await create_legacy(
        kube,
        tns,
        {
            "gatewayRef": {"namespace": GATEWAY_NS, "name": gateway},
            "apiKeys": {"maxExpirationDays": 30},
            "telemetry": {"enabled": True},
        },
    )
    # A config a tenant admin already tuned, before the AITenant existed.
    await kube.create(
        MaasTenantConfig.from_dict(
            {
                "apiVersion": contract.API_VERSION,
                "kind": "MaasTenantConfig",
                "metadata": {"name": "default-tenant", "namespace": tns},
                "spec": {"apiKeys": {"maxExpirationDays": 7}},
            }
        )
    )
    await samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS))
    await wait_phase(kube, name, "Active")

    config = await get_config(kube, tns)
    assert config["spec"]["apiKeys"] == {"maxExpirationDays": 7}  # the admin's value wins
    assert config["spec"]["telemetry"] == {"enabled": True}  # the gap is filled
    assert config["metadata"]["annotations"][contract.ANNOTATION_AITENANT_NAME] == name

    # Marked, but kept: its apiKeys are not what the config holds.
    legacy = await get_legacy(kube, tns)
    assert legacy is not None
    assert MIGRATED.items() <= (legacy["metadata"].get("annotations") or {}).items()
    assert not legacy["metadata"].get("deletionTimestamp")


async def test_gateway_namespace_mismatch_fails_and_touches_nothing(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("mismatch")
    gateway = f"{name}-gw"
    tns = await prepare(kube, name, gateway)
    await create_legacy(
        kube,
        tns,
        {
            "gatewayRef": {"namespace": "openshift-ingress", "name": gateway},
            "externalOIDC": oidc_for(name),
            "apiKeys": {"maxExpirationDays": 30},
        },
    )
    await samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS))
    obj = await wait_phase(kube, name, "Failed", "LegacyTenantMigrationFailed")

    assert ready(obj)["message"] == (
        f'legacy Tenant {tns}/default-tenant spec.gatewayRef.namespace="openshift-ingress" '
        f'does not match configured gateway namespace "{GATEWAY_NS}"; AITenant supports '
        "gateway name migration only, so update --gateway-namespace or clear the legacy "
        "namespace before migration"
    )
    assert obj["status"]["tenantNamespace"] == tns
    assert obj["spec"] == {}  # the OIDC copy was discarded
    with pytest.raises(ApiError) as info:
        await get_config(kube, tns)
    assert info.value.status.code == 404
    legacy = await get_legacy(kube, tns)
    assert legacy is not None
    assert not legacy["metadata"].get("annotations")

    # No requeue, as upstream: only a change to the AITenant brings it back.
    key = Key(AITENANT_NS, name)

    async def settled() -> bool:
        return controller.settled(key)

    await eventually(settled)  # the pass that wrote Failed scheduled nothing

    # The administrator clears the legacy namespace and touches the AITenant: migration resumes.
    await kube.patch(
        LegacyTenant,
        "default-tenant",
        {"spec": {"gatewayRef": {"namespace": GATEWAY_NS}}},
        namespace=tns,
        patch_type=PatchType.MERGE,
    )
    await kube.patch(
        AITenant,
        name,
        {"spec": {"gateway": {"name": gateway}}},
        namespace=AITENANT_NS,
        patch_type=PatchType.MERGE,
    )
    obj = await wait_phase(kube, name, "Active")
    assert obj["spec"]["oidc"] == oidc_for(name)
    assert await get_legacy(kube, tns) is None


async def test_shared_default_gateway_is_not_inherited_by_a_non_default_tenant(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("shared")
    tns = await prepare(kube, name, name)
    await create_legacy(
        kube, tns, {"gatewayRef": {"namespace": GATEWAY_NS, "name": "maas-default-gateway"}}
    )
    await samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS))
    obj = await wait_phase(kube, name, "Active")
    assert "gateway" not in obj["spec"]
    assert obj["status"]["gatewayRef"] == {"name": name, "namespace": GATEWAY_NS}
    assert await get_legacy(kube, tns) is None
    assert (await get_tenant(kube, name))["metadata"]["generation"] == 1


async def test_legacy_tenant_created_later_is_migrated_on_the_next_change(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Legacy Tenants are not watched (as upstream): a later one is picked up by the next pass."""
    name = unique("late")
    tns = await prepare(kube, name, name)
    await samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS))
    await wait_phase(kube, name, "Active")
    await create_legacy(
        kube, tns, {"gatewayRef": {"namespace": GATEWAY_NS}, "externalOIDC": oidc_for(name)}
    )
    # Any MaasTenantConfig event re-triggers the AITenant: a tenant admin's edit, say.
    await kube.patch(
        MaasTenantConfig,
        "default-tenant",
        {"spec": {"apiKeys": {"maxExpirationDays": 10}}},
        namespace=tns,
        patch_type=PatchType.MERGE,
    )

    async def migrated() -> bool:
        obj = await get_tenant(kube, name)
        return obj["spec"].get("oidc") == oidc_for(name) and await get_legacy(kube, tns) is None

    await eventually(migrated)
    assert (await get_config(kube, tns))["spec"]["apiKeys"] == {"maxExpirationDays": 10}


TTL_MINIMUM = (
    "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/externalOIDC"
    "/properties/ttl/minimum"
)


async def test_legacy_values_the_aitenant_would_refuse_are_not_migrated_at_all(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("badttl")
    gateway = f"{name}-gw"
    tns = await prepare(kube, name, gateway)
    bad_oidc = {**oidc_for(name), "ttl": 10}
    spec = {
        "gatewayRef": {"namespace": GATEWAY_NS, "name": gateway},
        "externalOIDC": bad_oidc,
        "apiKeys": {"maxExpirationDays": 30},
    }
    # Today's schema refuses such a Tenant; one stored under an older, laxer schema stays.
    with pytest.raises(ApiError) as info:
        await create_legacy(kube, tns, spec)
    assert info.value.status.code == 422
    async with samples.older_crd(kube, LegacyTenant, [TTL_MINIMUM]):
        await eventually(lambda: create_legacy(kube, tns, spec))

    async def strict_again() -> bool:
        probe = {
            "apiVersion": contract.API_VERSION,
            "kind": "Tenant",
            # The stored one's name: a lax schema answers 409 (it exists), a strict one 422.
            "metadata": {"name": contract.LEGACY_TENANT_NAME, "namespace": tns},
            "spec": spec,
        }
        try:
            await kube.create(LegacyTenant.from_dict(probe), dry_run=True)
        except ApiError as exc:
            return exc.status.code == 422
        return False

    await eventually(strict_again)
    assert (await get_legacy(kube, tns) or {})["spec"]["externalOIDC"]["ttl"] == 10

    await samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS))
    obj = await wait_phase(kube, name, "Failed", "LegacyTenantMigrationFailed")
    assert ready(obj)["message"] == (
        f"legacy Tenant {tns}/default-tenant spec.externalOIDC.ttl cannot be migrated to the "
        "AITenant: spec.oidc.ttl must be at least 30 seconds (got 10); use 30 or more, or "
        "remove it to get the default of 300. Correct spec.externalOIDC.ttl in the legacy "
        "Tenant, then change the AITenant's spec (or restart the controller) to resume"
    )
    # Nothing is half-done: not the gateway name, no config, the legacy object untouched.
    assert obj["spec"] == {}
    with pytest.raises(ApiError) as missing:
        await get_config(kube, tns)
    assert missing.value.status.code == 404
    legacy = await get_legacy(kube, tns)
    assert legacy is not None
    assert not legacy["metadata"].get("annotations")

    # The operator corrects the legacy value and touches the AITenant: everything migrates.
    await kube.patch(
        LegacyTenant,
        "default-tenant",
        {"spec": {"externalOIDC": {"ttl": 60}}},
        namespace=tns,
        patch_type=PatchType.MERGE,
    )
    await kube.patch(
        AITenant,
        name,
        {"spec": {"gateway": {"name": gateway}}},
        namespace=AITENANT_NS,
        patch_type=PatchType.MERGE,
    )
    obj = await wait_phase(kube, name, "Active")
    assert obj["spec"] == {"gateway": {"name": gateway}, "oidc": {**bad_oidc, "ttl": 60}}
    assert (await get_config(kube, tns))["spec"]["apiKeys"] == {"maxExpirationDays": 30}
    assert await get_legacy(kube, tns) is None
