"""``--enable-tenant-namespace-discovery`` as far as this controller goes (docs/contract.md
§3.6, §7).

Without discovery the MaasTenantConfig reconciler serves only ``default-tenant`` in the MaaS
subscription namespace, as upstream: a non-default tenant's config is left alone, so its
``tenant-cleanup`` finalizer never runs and the tenant's deletion cannot finish (until the
deletion timeout). With discovery on, the same config is served and deletion completes.
"""

from __future__ import annotations

import pytest
from devtools import samples
from devtools.cluster import LocalCluster
from devtools.maas_api import FakeMaasApi
from lightkube import ApiError, AsyncClient

from aitenant import contract
from aitenant.resources import AITenant, MaaSSubscription, MaasTenantConfig
from aitenant.runtime.control.controller import Done, Key

from ..harness import AITENANT_NS, RunningController, e2e_settings, eventually
from ..tenants import Names, get_tenant, make_tenant

pytestmark = pytest.mark.e2e


async def exists(kube: AsyncClient, kind: type, name: str, namespace: str) -> bool:
    try:
        await kube.get(kind, name, namespace=namespace)
    except ApiError as exc:
        if exc.status.code == 404:
            return False
        raise
    return True


async def test_without_discovery_a_non_default_config_is_not_served(
    cluster: LocalCluster,
    kube: AsyncClient,
    controller: RunningController,
    maas_api: FakeMaasApi,
    unique: Names,
) -> None:
    name = unique("undiscovered")
    tns = f"ai-tenant-{name}"
    await controller.stop()
    blind = RunningController(
        cluster, e2e_settings(maas_api, enable_tenant_namespace_discovery=False)
    )
    await blind.start()
    try:
        await make_tenant(kube, name)
        await eventually(lambda: kube.get(MaasTenantConfig, "default-tenant", namespace=tns))
        await kube.create(MaaSSubscription.from_dict(samples.maas_subscription("sub", tns)))
        await kube.delete(AITenant, name, namespace=AITENANT_NS)

        async def config_deleting() -> bool:
            config = await kube.get(MaasTenantConfig, "default-tenant", namespace=tns)
            return bool(config["metadata"].get("deletionTimestamp"))

        await eventually(config_deleting)
        # Nobody serves the config: a pass of the config controller over it does nothing,
        # so its finalizer stays and the tenant's MaaS objects stay.
        assert blind.app is not None
        config_key = Key(tns, "default-tenant")
        assert await blind.app.config_controller.process(config_key) == Done()
        assert not blind.app.config_controller.queue.failures(config_key)
        config = await kube.get(MaasTenantConfig, "default-tenant", namespace=tns)
        assert contract.TENANT_CONFIG_FINALIZER in config["metadata"]["finalizers"]
        assert await exists(kube, MaaSSubscription, "sub", tns)
        assert (await get_tenant(kube, name))["status"]["phase"] == "Terminating"
    finally:
        await blind.stop()
        await controller.start()

    # The session controller runs with discovery on: the same config is served now.
    async def finished() -> bool:
        return not await exists(kube, AITenant, name, AITENANT_NS)

    await eventually(finished, timeout=30)
    assert not await exists(kube, MaaSSubscription, "sub", tns)
    assert not await exists(kube, MaasTenantConfig, "default-tenant", tns)
