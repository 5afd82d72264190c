"""The MaasTenantConfig's cleanup, against a scripted API (the platform cache not synced, so
every place a platform object can be is listed)."""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient

from aitenant import contract
from aitenant.platform.apply import Applier
from aitenant.platform.cache import PlatformCache
from aitenant.platform.prune import TrackedObjects
from aitenant.reconcilers.config_deletion import ConfigCleanup
from aitenant.runtime.controller import Done, Key, RequeueAfter
from aitenant.settings import Settings

from ..scripted_api import ScriptedApi, echo, listing, ok
from .test_status import CONFIGS, config

GROUP = "/apis/maas.opendatahub.io/v1alpha1/namespaces/ai-tenant-red"
INFRA, GATEWAY_NS = "infra", "gateways"
SETTINGS = Settings(infra_namespace=INFRA, gateway_namespace=GATEWAY_NS)
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{INFRA}/deployments"
KEY = Key("ai-tenant-red", "default-tenant")


def deleting() -> dict[str, Any]:
    obj = config()
    obj["metadata"].update(
        deletionTimestamp="2026-01-01T00:00:00Z",
        finalizers=[contract.TENANT_CONFIG_FINALIZER],
        labels={contract.LABEL_TENANT_NAME: "red"},
    )
    return obj


def cleanup(client: AsyncClient, remembered: list[dict[str, Any]] | None = None) -> ConfigCleanup:
    applier = Applier(client)
    cache = PlatformCache(client, infra_namespace=INFRA, gateway_namespace=GATEWAY_NS)
    tracked = TrackedObjects(applier, cache, infra_namespace=INFRA)
    return ConfigCleanup(
        client=client,
        settings=SETTINGS,
        applier=applier,
        tracked=tracked,
        remember=(remembered if remembered is not None else []).append,
    )


async def test_maas_resources_go_first_and_are_awaited() -> None:
    subscription = {"metadata": {"name": "sub", "namespace": "ai-tenant-red"}}
    api = (
        ScriptedApi()
        .on("GET", f"{GROUP}/maassubscriptions", listing([subscription], "3"))
        .on("DELETE", f"{GROUP}/maassubscriptions/sub", ok({}))
    )
    assert await cleanup(api.client())(KEY, deleting()) == RequeueAfter(2.0)
    assert api.writes == [("DELETE", f"{GROUP}/maassubscriptions/sub")]


async def test_tracked_objects_then_the_finalizer() -> None:
    deployment = {"metadata": {"name": "maas-api-red", "namespace": INFRA}}
    api = (
        ScriptedApi()
        .on("GET", DEPLOYMENTS, listing([deployment], "4"))
        .on("DELETE", f"{DEPLOYMENTS}/maas-api-red", ok({}))
        .on("PATCH", f"{CONFIGS}/default-tenant", echo(200))
    )
    remembered: list[dict[str, Any]] = []
    assert await cleanup(api.client(), remembered)(KEY, deleting()) == Done()
    assert api.writes == [
        ("DELETE", f"{DEPLOYMENTS}/maas-api-red"),
        ("PATCH", f"{CONFIGS}/default-tenant"),
    ]
    (patch,) = api.bodies("PATCH", f"{CONFIGS}/default-tenant")
    assert patch["metadata"]["finalizers"] is None
    # The answer is remembered: a pass queued meanwhile finds the finalizer gone.
    assert [obj["metadata"].get("finalizers") for obj in remembered] == [None]
    # Every place of the platform was listed with the tenant's tracking labels.
    listed = {path for _verb, path in api.requests("GET")}
    assert f"/apis/batch/v1/namespaces/{INFRA}/cronjobs" in listed
    assert "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings" in listed
    assert f"/apis/kuadrant.io/v1/namespaces/{GATEWAY_NS}/authpolicies" in listed
    selectors = {s.params.get("labelSelector") for s in api.sent if s.path == DEPLOYMENTS}
    assert selectors == {
        f"{contract.LABEL_MANAGED_BY}={contract.PLATFORM_MANAGED_BY_VALUE},"
        f"{contract.LABEL_TENANT_NAME}=red,{contract.LABEL_TENANT_NAMESPACE}=ai-tenant-red"
    }


async def test_a_config_without_our_finalizer_is_left_alone() -> None:
    api = ScriptedApi()
    obj = deleting()
    obj["metadata"]["finalizers"] = ["someone-else"]
    assert await cleanup(api.client())(KEY, obj) == Done()
    assert api.sent == []
