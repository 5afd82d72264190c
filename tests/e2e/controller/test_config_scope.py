"""Which MaasTenantConfigs the platform reconciler serves, on a real API server.

Only ``default-tenant`` is a tenant's config. Another config in a tenant namespace that copies
its labels and annotations gets no finalizer and no status, and deleting it deletes nothing of
the tenant. A cleanup finalizer an older controller left on a config we do not serve (any
config not named ``default-tenant``; an unlabelled ``default-tenant`` in the subscription
namespace) is removed, and nothing else of that config is written.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from devtools import samples
from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from aitenant import contract
from aitenant.platform import kinds
from aitenant.resources import MaaSSubscription, MaasTenantConfig
from aitenant.runtime.control.controller import Key

from ..harness import INFRA_NS, SUBSCRIPTION_NS, RunningController, eventually
from ..tenants import Names, get_tenant, make_tenant, wait_phase

pytestmark = pytest.mark.e2e

FINALIZER = contract.TENANT_CONFIG_FINALIZER
FOREIGN_FINALIZER = "example.com/keep-me"


async def get_optional(kube: AsyncClient, kind: Any, name: str, ns: str) -> dict[str, Any] | None:
    try:
        return dict(await kube.get(kind, name, namespace=ns))
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise


async def seen_by_controller(controller: RunningController, namespace: str, name: str) -> None:
    """Wait until the controller's informer holds the config, then run one pass for it, as
    its watch event would (so the assertions after this see that pass's effect)."""
    app = controller.app
    assert app is not None
    await eventually(lambda: _informer_has(controller, namespace, name))
    await app.config_controller.process(Key(namespace, name))


async def _informer_has(controller: RunningController, namespace: str, name: str) -> bool:
    assert controller.app is not None
    return controller.app.configs.get(namespace, name) is not None


def unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Labels, annotations, spec and status as they were."""
    for field in ("labels", "annotations"):
        assert after["metadata"].get(field) == before["metadata"].get(field), field
    assert after.get("spec") == before.get("spec")
    assert not after.get("status")


async def tenant_with_subscription(kube: AsyncClient, name: str) -> tuple[str, str, str]:
    """An Active tenant and a MaaSSubscription in its namespace; returns (tenant namespace,
    uid of its maas-api Deployment, uid of the subscription)."""
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    subscription = await kube.create(
        MaaSSubscription.from_dict(samples.maas_subscription("team", tns))
    )
    deployment = await kube.get(kinds.DEPLOYMENT.resource, f"maas-api-{name}", namespace=INFRA_NS)
    assert deployment.metadata is not None
    assert subscription.metadata is not None
    return tns, str(deployment.metadata.uid), str(subscription.metadata.uid)


async def assert_tenant_intact(
    kube: AsyncClient, name: str, deployment_uid: str, subscription_uid: str
) -> None:
    tns = f"ai-tenant-{name}"
    deployment = dict(
        await kube.get(kinds.DEPLOYMENT.resource, f"maas-api-{name}", namespace=INFRA_NS)
    )
    assert deployment["metadata"]["uid"] == deployment_uid
    assert not deployment["metadata"].get("deletionTimestamp")
    subscription = await get_optional(kube, MaaSSubscription, "team", tns)
    assert subscription is not None
    assert subscription["metadata"]["uid"] == subscription_uid
    assert not subscription["metadata"].get("deletionTimestamp")
    assert (await get_tenant(kube, name))["status"]["phase"] == "Active"


async def copy_of_default_tenant(
    kube: AsyncClient, tns: str, name: str, finalizers: list[str] | None = None
) -> dict[str, Any]:
    """A second config carrying the tenant config's labels, annotations and spec."""
    source = dict(await kube.get(MaasTenantConfig, contract.TENANT_CONFIG_NAME, namespace=tns))
    meta = source["metadata"]
    body = {
        "apiVersion": contract.API_VERSION,
        "kind": "MaasTenantConfig",
        "metadata": {
            "name": name,
            "namespace": tns,
            "labels": copy.deepcopy(meta.get("labels")),
            "annotations": copy.deepcopy(meta.get("annotations")),
            "finalizers": finalizers,
        },
        "spec": copy.deepcopy(source.get("spec") or {}),
    }
    return dict(await kube.create(MaasTenantConfig.from_dict(body)))


@pytest.fixture
async def configs_named_freely(kube: AsyncClient) -> AsyncIterator[None]:
    """A second config can exist only where the CRD's name rule came after it."""
    async with samples.without_name_rule(kube, MaasTenantConfig):
        yield


@pytest.mark.usefixtures("configs_named_freely")
async def test_a_second_config_with_the_tenants_labels_is_not_served(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("extra")
    tns, deployment_uid, subscription_uid = await tenant_with_subscription(kube, name)
    extra = await copy_of_default_tenant(kube, tns, "extra")
    assert extra["metadata"]["labels"][contract.LABEL_MANAGED_BY_AITENANT] == "true"

    await seen_by_controller(controller, tns, "extra")
    after = dict(await kube.get(MaasTenantConfig, "extra", namespace=tns))
    assert after["metadata"]["resourceVersion"] == extra["metadata"]["resourceVersion"]
    assert not after["metadata"].get("finalizers")
    unchanged(extra, after)

    await kube.delete(MaasTenantConfig, "extra", namespace=tns)
    assert await get_optional(kube, MaasTenantConfig, "extra", tns) is None
    await eventually(lambda: _gone_from_informer(controller, tns, "extra"))
    assert controller.app is not None
    await controller.app.config_controller.process(Key(tns, "extra"))
    await assert_tenant_intact(kube, name, deployment_uid, subscription_uid)


async def _gone_from_informer(controller: RunningController, namespace: str, name: str) -> bool:
    return not await _informer_has(controller, namespace, name)


@pytest.mark.usefixtures("configs_named_freely")
async def test_leftover_finalizer_on_a_second_config_is_stripped_and_nothing_deleted(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("leftover")
    tns, deployment_uid, subscription_uid = await tenant_with_subscription(kube, name)
    # As an older controller left it: our finalizer (and someone else's), then deleted.
    extra = await copy_of_default_tenant(
        kube, tns, "extra", finalizers=[FINALIZER, FOREIGN_FINALIZER]
    )
    await kube.delete(MaasTenantConfig, "extra", namespace=tns)

    async def stripped() -> dict[str, Any] | None:
        obj = await get_optional(kube, MaasTenantConfig, "extra", tns)
        assert obj is not None
        assert obj["metadata"].get("deletionTimestamp")
        return obj if obj["metadata"]["finalizers"] == [FOREIGN_FINALIZER] else None

    after = await eventually(stripped)
    unchanged(extra, after)
    # Our finalizer's removal was the pass's last step: had it cleaned up, it would be done.
    await assert_tenant_intact(kube, name, deployment_uid, subscription_uid)

    await kube.patch(
        MaasTenantConfig,
        "extra",
        {"metadata": {"finalizers": None}},
        namespace=tns,
        patch_type=PatchType.MERGE,
    )

    async def gone() -> bool:
        return await get_optional(kube, MaasTenantConfig, "extra", tns) is None

    await eventually(gone)
    await assert_tenant_intact(kube, name, deployment_uid, subscription_uid)


def unlabelled_default_config(finalizers: list[str]) -> Any:
    return MaasTenantConfig.from_dict(
        {
            "apiVersion": contract.API_VERSION,
            "kind": "MaasTenantConfig",
            "metadata": {
                "name": contract.TENANT_CONFIG_NAME,
                "namespace": SUBSCRIPTION_NS,
                "labels": {"team": "platform"},
                "annotations": {"note": "left by an older controller"},
                "finalizers": finalizers,
            },
            "spec": {"apiKeys": {"maxExpirationDays": 30}},
        }
    )


async def no_default_config(kube: AsyncClient) -> None:
    async def absent() -> bool:
        return (
            await get_optional(kube, MaasTenantConfig, contract.TENANT_CONFIG_NAME, SUBSCRIPTION_NS)
            is None
        )

    await eventually(absent, timeout=30)


async def test_unlabelled_default_config_loses_only_the_leftover_finalizer(
    kube: AsyncClient, controller: RunningController
) -> None:
    assert not controller.settings.manage_default_tenant
    await samples.ensure_namespace(kube, SUBSCRIPTION_NS)
    await no_default_config(kube)
    subscription = await kube.create(
        MaaSSubscription.from_dict(samples.maas_subscription("unmanaged-sub", SUBSCRIPTION_NS))
    )
    try:
        # Live: the finalizer goes, someone else's stays, nothing else is written.
        created = dict(await kube.create(unlabelled_default_config([FINALIZER, FOREIGN_FINALIZER])))

        async def stripped() -> dict[str, Any] | None:
            obj = await get_optional(
                kube, MaasTenantConfig, contract.TENANT_CONFIG_NAME, SUBSCRIPTION_NS
            )
            assert obj is not None
            return obj if obj["metadata"]["finalizers"] == [FOREIGN_FINALIZER] else None

        after = await eventually(stripped)
        unchanged(created, after)
        # Deleting: it finishes once the other finalizer goes too.
        await kube.delete(MaasTenantConfig, contract.TENANT_CONFIG_NAME, namespace=SUBSCRIPTION_NS)
        await kube.patch(
            MaasTenantConfig,
            contract.TENANT_CONFIG_NAME,
            {"metadata": {"finalizers": None}},
            namespace=SUBSCRIPTION_NS,
            patch_type=PatchType.MERGE,
        )
        await no_default_config(kube)

        # Created with only our finalizer and deleted at once: it can finish deleting.
        await kube.create(unlabelled_default_config([FINALIZER]))
        await kube.delete(MaasTenantConfig, contract.TENANT_CONFIG_NAME, namespace=SUBSCRIPTION_NS)
        await no_default_config(kube)

        kept = await get_optional(kube, MaaSSubscription, "unmanaged-sub", SUBSCRIPTION_NS)
        assert subscription.metadata is not None
        assert kept is not None
        assert kept["metadata"]["uid"] == subscription.metadata.uid
        assert not kept["metadata"].get("deletionTimestamp")
    finally:
        await kube.delete(MaaSSubscription, "unmanaged-sub", namespace=SUBSCRIPTION_NS)
