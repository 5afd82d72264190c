"""The MaasTenantConfig's cleanup, against a scripted API (the platform cache not synced, so
every place a platform object can be is listed)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx2
from lightkube import AsyncClient

from aitenant import contract
from aitenant.controllers.tenant_config.cleanup import ConfigCleanup
from aitenant.platform.apply import Applier
from aitenant.platform.cache import PlatformCache
from aitenant.platform.prune import TrackedObjects
from aitenant.runtime.client.requests import LIST_PAGE
from aitenant.runtime.control.controller import Done, Key, RequeueAfter
from aitenant.settings import Settings

from ...scripted_api import ScriptedApi, echo, listing, ok
from ..test_status import CONFIGS, config

GROUP = "/apis/maas.opendatahub.io/v1alpha1/namespaces/ai-tenant-red"
INFRA, GATEWAY_NS = "infra", "gateways"
SETTINGS = Settings(infra_namespace=INFRA, gateway_namespace=GATEWAY_NS)
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{INFRA}/deployments"
KEY = Key("ai-tenant-red", "default-tenant")
DELETED_AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def deleting() -> dict[str, Any]:
    obj = config()
    obj["metadata"].update(
        deletionTimestamp="2026-01-01T00:00:00Z",
        finalizers=[contract.TENANT_CONFIG_FINALIZER],
        labels={contract.LABEL_TENANT_NAME: "red"},
    )
    return obj


OWNER = {"metadata": {"name": "red", "namespace": SETTINGS.aitenant_namespace}}


def cleanup(
    client: AsyncClient,
    remembered: list[dict[str, Any]] | None = None,
    *,
    owner: dict[str, Any] | None = OWNER,
    minutes: float = 1,
) -> ConfigCleanup:
    applier = Applier(client)
    cache = PlatformCache(client, infra_namespace=INFRA, gateway_namespace=GATEWAY_NS)
    tracked = TrackedObjects(applier, cache, infra_namespace=INFRA)
    return ConfigCleanup(
        client=client,
        settings=SETTINGS,
        applier=applier,
        tracked=tracked,
        remember=(remembered if remembered is not None else []).append,
        get_tenant=lambda namespace, name: (
            owner if (namespace, name) == (SETTINGS.aitenant_namespace, "red") else None
        ),
        now=lambda: DELETED_AT + dt.timedelta(minutes=minutes),
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


def _stuck_subscription_and_a_platform() -> ScriptedApi:
    """A MaaSSubscription a foreign finalizer holds forever, and a maas-api Deployment."""
    subscription = {
        "metadata": {
            "name": "sub",
            "namespace": "ai-tenant-red",
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": ["example.com/never"],
        }
    }
    deployment = {"metadata": {"name": "maas-api-red", "namespace": INFRA}}
    return (
        ScriptedApi()
        .on("GET", f"{GROUP}/maassubscriptions", listing([subscription], "3"))
        .on("GET", DEPLOYMENTS, listing([deployment], "4"))
        .on("DELETE", f"{DEPLOYMENTS}/maas-api-red", ok({}))
        .on("PATCH", f"{CONFIGS}/default-tenant", echo(200))
    )


async def test_once_the_aitenant_is_gone_the_platform_goes_despite_stuck_maas_objects() -> None:
    # Its deletion was forced: nothing waits for this cleanup any more (docs/contract.md §5.5).
    api = _stuck_subscription_and_a_platform()
    assert await cleanup(api.client(), owner=None)(KEY, deleting()) == Done()
    assert api.writes == [
        ("DELETE", f"{DEPLOYMENTS}/maas-api-red"),
        ("PATCH", f"{CONFIGS}/default-tenant"),
    ]


async def test_past_the_deletion_timeout_the_platform_goes_despite_stuck_maas_objects() -> None:
    api = _stuck_subscription_and_a_platform()
    # The AITenant still exists: within the timeout the cleanup waits, as before...
    assert await cleanup(api.client(), minutes=9)(KEY, deleting()) == RequeueAfter(2.0)
    assert api.writes == []
    # ...and past it (the default 10 minutes) it stops waiting.
    assert await cleanup(api.client(), minutes=10)(KEY, deleting()) == Done()
    assert ("DELETE", f"{DEPLOYMENTS}/maas-api-red") in api.writes


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


async def test_a_thousand_maas_objects_are_read_in_pages() -> None:
    """A tenant admin may create thousands of MaaSSubscriptions: the cleanup reads them a page
    at a time (docs/design.md §9.5), never in one response."""
    subscriptions = [
        {
            "metadata": {
                "name": f"sub-{i}",
                "namespace": "ai-tenant-red",
                "deletionTimestamp": "2026-01-01T00:00:00Z",
                "finalizers": ["example.com/hold"],
            }
        }
        for i in range(1000)
    ]

    def page(request: httpx2.Request) -> httpx2.Response:
        limit = int(request.url.params.get("limit") or len(subscriptions))
        start = int(request.url.params.get("continue") or 0)
        end = start + limit
        meta = {"resourceVersion": "3"} | ({"continue": str(end)} if end < 1000 else {})
        body = {"kind": "List", "metadata": meta, "items": subscriptions[start:end]}
        return httpx2.Response(200, json=body)

    api = ScriptedApi().on("GET", f"{GROUP}/maassubscriptions", page)
    assert await cleanup(api.client())(KEY, deleting()) == RequeueAfter(2.0)
    lists = [s.params for s in api.sent if s.path == f"{GROUP}/maassubscriptions"]
    pages = range(0, 1000, LIST_PAGE)
    assert [p.get("limit") for p in lists] == [str(LIST_PAGE)] * len(pages)
    assert [p.get("continue") for p in lists] == [None, *(str(start) for start in pages[1:])]
    assert api.writes == []  # each one already deleting: waited for, not deleted again
