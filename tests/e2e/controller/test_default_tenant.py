"""The default tenant and its Config/default anchor against a real API server
(docs/contract.md §4, docs/differences.md D7).

The tests in this module share one story and run in file order: bootstrap on a cluster with no
Config; the Config deleted (the garbage collector takes the tenant, a new Config bootstraps a
new one); the tenant deleted by an administrator (not recreated); a legacy Tenant picked up by
the next bootstrap. They run with their own controller (``--manage-default-tenant`` on,
namespace discovery off, so the default tenant's config is the only one served).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from devtools import samples
from devtools.cluster import LocalCluster
from devtools.maas_api import FakeMaasApi
from lightkube import ApiError, AsyncClient
from lightkube.types import CascadeType

from aitenant import contract
from aitenant.resources import AITenant, Config, LegacyTenant, MaaSSubscription, MaasTenantConfig

from ..harness import (
    AITENANT_NS,
    GATEWAY_NS,
    SUBSCRIPTION_NS,
    RunningController,
    e2e_settings,
    eventually,
)
from ..tenants import get_tenant, wait_phase

pytestmark = pytest.mark.e2e

DEFAULT = contract.DEFAULT_TENANT_NAME
MARKER = "maas.opendatahub.io/default-aitenant-bootstrapped"
# The garbage collector discovers new CRDs every 30 s: allow for one round.
GC_TIMEOUT = 60.0


async def get_config(kube: AsyncClient) -> dict[str, Any]:
    return dict(await kube.get(Config, "default"))


async def get_optional(kube: AsyncClient, kind: Any, name: str, ns: str) -> dict[str, Any] | None:
    try:
        return dict(await kube.get(kind, name, namespace=ns))
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise


def config_refs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in obj["metadata"].get("ownerReferences") or [] if r["kind"] == "Config"]


async def ensure_gateway(kube: AsyncClient, name: str) -> None:
    with contextlib.suppress(ApiError):
        await samples.create_gateway(kube, samples.gateway(name, GATEWAY_NS))


async def wait_tenant_gone(kube: AsyncClient, uid: str, timeout: float) -> None:
    async def gone() -> bool:
        obj = await get_optional(kube, AITenant, DEFAULT, AITENANT_NS)
        return obj is None or obj["metadata"]["uid"] != uid

    await eventually(gone, timeout=timeout, interval=0.2)


async def wait_marked(kube: AsyncClient) -> dict[str, Any]:
    async def marked() -> dict[str, Any] | None:
        config = await get_config(kube)
        return config if (config["metadata"].get("annotations") or {}).get(MARKER) else None

    return await eventually(marked)


@pytest.fixture(scope="module")
async def bootstrapper(
    cluster: LocalCluster, kube: AsyncClient, controller: RunningController, maas_api: FakeMaasApi
) -> AsyncIterator[RunningController]:
    """Swap the session controller for one that manages the default tenant."""
    await ensure_gateway(kube, "maas-default-gateway")
    await controller.stop()
    running = RunningController(
        cluster,
        e2e_settings(maas_api, manage_default_tenant=True, enable_tenant_namespace_discovery=False),
    )
    await running.start()
    try:
        yield running
        # Leave no default tenant behind; the marker keeps it from coming back.
        tenant = await get_optional(kube, AITenant, DEFAULT, AITENANT_NS)
        if tenant is not None:
            await kube.delete(AITenant, DEFAULT, namespace=AITENANT_NS)
            await wait_tenant_gone(kube, tenant["metadata"]["uid"], timeout=30)
    finally:
        await running.stop()
        await controller.start()


async def test_config_and_default_tenant_are_bootstrapped(
    kube: AsyncClient, bootstrapper: RunningController
) -> None:
    config = await eventually(lambda: get_config(kube))
    obj = await wait_phase(kube, DEFAULT, "Active")

    assert obj["spec"] == {"gateway": {"name": "maas-default-gateway"}}
    # A non-controller reference: deleting the Config collects the tenant, nothing more.
    assert obj["metadata"]["ownerReferences"] == [
        {
            "apiVersion": contract.API_VERSION,
            "kind": "Config",
            "name": "default",
            "uid": config["metadata"]["uid"],
        }
    ]
    status = obj["status"]
    assert status["tenantNamespace"] == SUBSCRIPTION_NS
    assert status["gatewayRef"] == {"name": "maas-default-gateway", "namespace": GATEWAY_NS}

    # Marked once Ready.
    await wait_marked(kube)

    # Its config in the MaaS subscription namespace is anchored to the Config too
    # (docs/contract.md §4.2).
    async def anchored() -> bool:
        tenant_config = await kube.get(
            MaasTenantConfig, "default-tenant", namespace=SUBSCRIPTION_NS
        )
        return [r["uid"] for r in config_refs(dict(tenant_config))] == [config["metadata"]["uid"]]

    await eventually(anchored)


async def test_deleting_config_collects_the_tenant_and_bootstraps_again(
    kube: AsyncClient, bootstrapper: RunningController
) -> None:
    old_config = await get_config(kube)
    old_tenant = await wait_phase(kube, DEFAULT, "Active")

    await kube.delete(Config, "default", cascade=CascadeType.BACKGROUND)
    # The garbage collector deletes the tenant (its cleanup runs) and the controller recreates
    # the anchor at once (docs/differences.md D7); the new Config has no marker, so the tenant
    # is bootstrapped again.
    await wait_tenant_gone(kube, old_tenant["metadata"]["uid"], timeout=GC_TIMEOUT)
    new = await wait_phase(kube, DEFAULT, "Active")

    config = await wait_marked(kube)
    assert config["metadata"]["uid"] != old_config["metadata"]["uid"]
    assert [r["uid"] for r in config_refs(new)] == [config["metadata"]["uid"]]


async def test_deleted_default_tenant_is_not_recreated(
    kube: AsyncClient, bootstrapper: RunningController
) -> None:
    tenant = await wait_phase(kube, DEFAULT, "Active")
    await wait_marked(kube)
    subscription = samples.maas_subscription("team-sub", SUBSCRIPTION_NS)
    await kube.create(MaaSSubscription.from_dict(subscription))

    await kube.delete(AITenant, DEFAULT, namespace=AITENANT_NS)
    await wait_tenant_gone(kube, tenant["metadata"]["uid"], timeout=30)

    # Discovery is off, yet the default tenant's config was served: its MaaS objects are gone.
    assert await get_optional(kube, MaaSSubscription, "team-sub", SUBSCRIPTION_NS) is None
    assert await get_optional(kube, MaasTenantConfig, "default-tenant", SUBSCRIPTION_NS) is None

    # The marker says an administrator deleted it: a bootstrap pass leaves it deleted.
    app = bootstrapper.app
    assert app is not None
    assert app.bootstrap is not None
    plan = await app.bootstrap.tick()
    assert not plan.create_tenant, plan.note
    assert await get_optional(kube, AITenant, DEFAULT, AITENANT_NS) is None


async def test_bootstrap_takes_gateway_and_oidc_from_a_legacy_tenant(
    kube: AsyncClient, bootstrapper: RunningController
) -> None:
    assert await get_optional(kube, AITenant, DEFAULT, AITENANT_NS) is None
    await ensure_gateway(kube, "legacy-default-gw")
    oidc = {"issuerUrl": "https://idp.example.com/realms/maas", "clientId": "maas", "ttl": 60}
    await kube.create(
        LegacyTenant.from_dict(
            {
                "apiVersion": contract.API_VERSION,
                "kind": "Tenant",
                "metadata": {"name": "default-tenant", "namespace": SUBSCRIPTION_NS},
                "spec": {
                    "gatewayRef": {"namespace": GATEWAY_NS, "name": "legacy-default-gw"},
                    "externalOIDC": oidc,
                    "apiKeys": {"maxExpirationDays": 45},
                    "telemetry": {"enabled": True},
                },
            }
        )
    )
    # A new Config lifecycle: the marker goes with the old Config.
    await kube.delete(Config, "default")

    obj = await wait_phase(kube, DEFAULT, "Active")
    assert obj["spec"] == {"gateway": {"name": "legacy-default-gw"}, "oidc": oidc}
    assert obj["status"]["gatewayRef"] == {"name": "legacy-default-gw", "namespace": GATEWAY_NS}
    tenant_config = await kube.get(MaasTenantConfig, "default-tenant", namespace=SUBSCRIPTION_NS)
    assert tenant_config["spec"]["apiKeys"] == {"maxExpirationDays": 45}
    assert tenant_config["spec"]["telemetry"] == {"enabled": True}
    assert await get_optional(kube, LegacyTenant, "default-tenant", SUBSCRIPTION_NS) is None
    await wait_marked(kube)
    assert (await get_tenant(kube, DEFAULT))["metadata"]["uid"] == obj["metadata"]["uid"]
