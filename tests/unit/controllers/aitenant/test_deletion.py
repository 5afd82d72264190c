"""AITenant deletion: order of steps, outcomes and writes, against a scripted API."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import httpx
import pytest

from aitenant import contract, naming
from aitenant.controllers.aitenant.deletion import REQUEUE_REVOCATION, TenantFinalizer
from aitenant.controllers.aitenant.revocation import KeyRevoker, Revocations
from aitenant.controllers.status import StatusWriter
from aitenant.platform.cache import PlatformCache
from aitenant.resources import AITenant, AITenantView
from aitenant.runtime.cache.reads import CachedReads
from aitenant.runtime.client.events import EventRecorder
from aitenant.runtime.control.controller import Done, RequeueAfter, Retry
from aitenant.settings import Settings

from ...scripted_api import ScriptedApi, echo, listing, ok, status
from .test_reconciler import EVENTS, GATEWAY_NS, NS, TENANTS, tenant

DELETED_AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SETTINGS = Settings(
    aitenant_namespace=NS,
    gateway_namespace=GATEWAY_NS,
    controller_namespace="aitenant-system",
    maas_api_url_template="https://maas-api.test/{tenant}/api-keys",
)
CONFIG = "/apis/maas.opendatahub.io/v1alpha1/namespaces/ai-tenant-red/maastenantconfigs"
CLAIMS = f"/api/v1/namespaces/{NS}/configmaps"


def maas_api(*answers: httpx.Response) -> tuple[KeyRevoker, list[str]]:
    """A revoker whose maas-api answers ``answers`` in turn (the last repeats)."""
    queue, calls = list(answers), []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.method} {request.url}")
        return queue.pop(0) if len(queue) > 1 else queue[0]

    revoker = KeyRevoker(ca_file=None, backoff=0.0, transport=httpx.MockTransport(handle))
    return revoker, calls


def deleting(**meta: Any) -> dict[str, Any]:
    return tenant("red", deletionTimestamp="2026-01-01T00:00:00Z", **meta)


async def finalize(
    api: ScriptedApi,
    revoker: KeyRevoker,
    obj: dict[str, Any],
    minutes: float = 1,
    remembered: list[dict[str, Any]] | None = None,
    revocations: Revocations | None = None,
) -> Any:
    client = api.client()
    events = EventRecorder(client, component="unit-tests")
    finalizer = TenantFinalizer(
        client=client,
        settings=SETTINGS,
        events=events,
        revocations=revocations or Revocations(revoker),
        # Nothing served or synced: every read goes to the scripted API.
        reads=CachedReads(client),
        platform=PlatformCache(
            client, infra_namespace="aitenant-system", gateway_namespace=GATEWAY_NS
        ),
        now=lambda: DELETED_AT + dt.timedelta(minutes=minutes),
    )
    keep = remembered if remembered is not None else []
    writer = StatusWriter(client, AITenant, obj, 1, keep.append, events=events)
    return await finalizer(AITenantView(obj), writer)


def scripted() -> ScriptedApi:
    api = ScriptedApi()
    api.on("UPDATE", f"{TENANTS}/red/status", echo(200))
    api.on("CREATE", EVENTS, echo())
    api.on("GET", CLAIMS, listing([], "1"))
    api.on("GET", f"{TENANTS}/red", ok(deleting()))
    api.on("PATCH", f"{TENANTS}/red", ok(deleting()))
    return api


def last_status(api: ScriptedApi) -> dict[str, Any]:
    return api.bodies("UPDATE", f"{TENANTS}/red/status")[-1]["status"]


def ready(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Ready")


async def test_keys_revoked_then_everything_released_then_the_finalizer_goes() -> None:
    api = scripted()
    revoker, calls = maas_api(httpx.Response(200, json={"revokedCount": 3}))
    api.on("PATCH", f"{TENANTS}/red", ok(deleting(finalizers=None, resourceVersion="101")))
    remembered: list[dict[str, Any]] = []

    assert await finalize(api, revoker, deleting(), remembered=remembered) == Done()

    assert calls == ["DELETE https://maas-api.test/red/api-keys"]
    revoked = next(c for c in last_status(api)["conditions"] if c["type"] == "APIKeysRevoked")
    assert revoked["status"] == "True"
    assert revoked["message"] == "Tenant API keys were revoked (revokedCount=3)"
    # Nothing else existed (every GET was 404): the finalizer patch is the last write.
    assert api.writes[-1] == ("PATCH", f"{TENANTS}/red")
    assert api.bodies("PATCH", f"{TENANTS}/red")[0]["metadata"]["finalizers"] is None
    # The answer is remembered: a pass queued meanwhile finds no finalizer and sends nothing.
    assert remembered[-1]["metadata"]["resourceVersion"] == "101"
    assert not remembered[-1]["metadata"].get("finalizers")
    reads = api.requests("GET")
    assert reads.index(("GET", f"{CONFIG}/default-tenant")) < reads.index(("GET", CLAIMS))


async def test_a_failed_revocation_blocks_the_deletion_and_is_retried_with_backoff() -> None:
    api = scripted()
    revoker, calls = maas_api(httpx.Response(503, text="down"))

    result = await finalize(api, revoker, deleting())

    assert isinstance(result, Retry)
    assert len(calls) == 3, "the revoker's own attempts"
    status = last_status(api)
    assert status["phase"] == "Terminating"
    assert ready(status)["reason"] == "DeletionBlocked"
    assert "HTTP 503: down" in ready(status)["message"]
    assert ("PATCH", f"{TENANTS}/red") not in api.writes, "the finalizer stays"
    assert ("GET", f"{CONFIG}/default-tenant") not in api.requests(), "no step after it ran"

    # The retry fails the same way: the status stays DeletionBlocked, nothing is written
    # (no flapping through DeletionInProgress, no second Event: docs/differences.md D28).
    blocked = {**deleting(), "status": status}
    retry = scripted()
    assert isinstance(await finalize(retry, revoker, blocked), Retry)
    assert retry.writes == []

    # Once maas-api answers, the keys are revoked and the deletion is in progress again.
    ok_revoker, _ = maas_api(httpx.Response(200, json={"revokedCount": 1}))
    retry.on("GET", f"{CONFIG}/default-tenant", ok(owned_config("x")))
    retry.on("PATCH", f"{CONFIG}/default-tenant", ok(owned_config("x")))
    retry.on("DELETE", f"{CONFIG}/default-tenant", ok({}))
    assert await finalize(retry, ok_revoker, blocked) == RequeueAfter(5)
    now = last_status(retry)
    assert (now["phase"], ready(now)["reason"]) == ("Terminating", "DeletionInProgress")
    assert retry.writes[0] == ("UPDATE", f"{TENANTS}/red/status"), "one write for both"
    assert len(retry.bodies("UPDATE", f"{TENANTS}/red/status")) == 1


def owned_config(*finalizers: str) -> dict[str, Any]:
    return {
        "apiVersion": contract.API_VERSION,
        "kind": "MaasTenantConfig",
        "metadata": {
            "name": "default-tenant",
            "namespace": "ai-tenant-red",
            "resourceVersion": "3",
            "finalizers": list(finalizers),
            "annotations": {
                contract.ANNOTATION_AITENANT_NAME: "red",
                contract.ANNOTATION_AITENANT_NAMESPACE: NS,
            },
        },
    }


async def test_the_config_cleanup_is_awaited() -> None:
    api = scripted()
    config = owned_config(contract.TENANT_CONFIG_FINALIZER)
    api.on("GET", f"{CONFIG}/default-tenant", ok(config))
    api.on("DELETE", f"{CONFIG}/default-tenant", ok({"kind": "Status", "status": "Success"}))
    revoker, _ = maas_api(httpx.Response(200, json={"revokedCount": 0}))

    assert await finalize(api, revoker, deleting()) == RequeueAfter(5)

    assert api.writes[-1] == ("DELETE", f"{CONFIG}/default-tenant")
    assert ("PATCH", f"{TENANTS}/red") not in api.writes


async def test_a_config_without_the_cleanup_finalizer_gets_it_before_its_delete() -> None:
    api = scripted()
    api.on("GET", f"{CONFIG}/default-tenant", ok(owned_config("someone-else")))
    api.on("PATCH", f"{CONFIG}/default-tenant", echo(200, rv="4"))
    api.on("DELETE", f"{CONFIG}/default-tenant", ok({"kind": "Status", "status": "Success"}))
    revoker, _ = maas_api(httpx.Response(200, json={"revokedCount": 0}))

    assert await finalize(api, revoker, deleting()) == RequeueAfter(5)

    assert api.writes[-2:] == [
        ("PATCH", f"{CONFIG}/default-tenant"),
        ("DELETE", f"{CONFIG}/default-tenant"),
    ]
    (patch,) = api.bodies("PATCH", f"{CONFIG}/default-tenant")
    assert patch["metadata"] == {
        "finalizers": ["someone-else", contract.TENANT_CONFIG_FINALIZER],
        "resourceVersion": "3",
    }


async def test_after_the_timeout_cleanup_is_forced_trying_the_revocation_once() -> None:
    """One call, no retry; what it could not do is a Warning Event of its own."""
    api = scripted()
    revoker, calls = maas_api(httpx.Response(503))

    assert await finalize(api, revoker, deleting(), minutes=11) == Done()

    assert calls == ["DELETE https://maas-api.test/red/api-keys"]
    assert ready(last_status(api))["reason"] == "CleanupForced"
    forced, unrevoked = api.bodies("CREATE", EVENTS)
    assert (forced["type"], forced["reason"]) == ("Warning", "AITenantCleanupForced")
    assert (unrevoked["type"], unrevoked["reason"]) == ("Warning", "APIKeysNotRevoked")
    assert unrevoked["message"] == (
        f"Forced cleanup of AITenant {NS}/red could not revoke its API keys, which stay valid "
        "until revoked (its next tenant of this name revokes them first): API key revocation "
        "via DELETE https://maas-api.test/red/api-keys failed: HTTP 503: "
    )
    assert api.writes[-1] == ("PATCH", f"{TENANTS}/red")


async def test_a_misplaced_tenant_only_drops_its_claims_and_finalizer() -> None:
    path = "/apis/maas.opendatahub.io/v1alpha1/namespaces/default/aitenants/red"
    obj = {**deleting(), "metadata": {**deleting()["metadata"], "namespace": "default"}}
    api = ScriptedApi().on("GET", CLAIMS, listing([], "1"))
    api.on("GET", path, ok(obj)).on("PATCH", path, ok(obj))
    revoker, calls = maas_api(httpx.Response(503))

    assert await finalize(api, revoker, obj) == Done()

    assert calls == []
    # The finalizer goes from the copy the pass started with: no read of the AITenant.
    assert api.requests() == [("GET", CLAIMS), ("PATCH", path)]


async def test_the_finalizer_is_removed_from_a_fresh_copy_after_a_conflict() -> None:
    api = scripted()
    fresh = deleting(resourceVersion="42")
    api.on("GET", f"{TENANTS}/red", ok(fresh))
    api.on(
        "PATCH",
        f"{TENANTS}/red",
        status(409, "Conflict", "the object has been modified"),
        ok(fresh),
    )
    revoker, _ = maas_api(httpx.Response(200, json={"revokedCount": 0}))

    assert await finalize(api, revoker, deleting()) == Done()

    patches = api.bodies("PATCH", f"{TENANTS}/red")
    assert [p["metadata"]["resourceVersion"] for p in patches[-2:]] == ["100", "42"]
    assert api.requests()[-3:] == [
        ("PATCH", f"{TENANTS}/red"),
        ("GET", f"{TENANTS}/red"),
        ("PATCH", f"{TENANTS}/red"),
    ]


def claim(owner: str) -> dict[str, Any]:
    """The claim on Gateway gateways/red, held by AITenant ``owner``."""
    ref = {
        "apiVersion": contract.API_VERSION,
        "kind": "AITenant",
        "name": owner,
        "uid": f"uid-{owner}",
        "controller": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": naming.claim_name(GATEWAY_NS, "red"),
            "namespace": NS,
            "ownerReferences": [ref],
        },
        "data": {"gatewayNamespace": GATEWAY_NS, "gatewayName": "red"},
    }


@pytest.mark.parametrize(("holder", "deleted"), [("red", True), ("green", False), (None, True)])
async def test_the_gateway_auth_policy_goes_only_with_the_tenant_holding_the_gateway(
    holder: str | None, deleted: bool
) -> None:
    """A tenant that lost its Gateway to another (two created at once, or from before the
    webhook) leaves the holder's AuthPolicy in place (docs/differences.md D27)."""
    api = scripted()
    revoker, _ = maas_api(httpx.Response(200, json={"revokedCount": 0}))
    policy = f"/apis/kuadrant.io/v1/namespaces/{GATEWAY_NS}/authpolicies/red-maas-auth"
    api.on("GET", policy, ok({"metadata": {"name": "red-maas-auth", "namespace": GATEWAY_NS}}))
    api.on("DELETE", policy, ok({}))
    if holder is not None:
        api.on("GET", f"{CLAIMS}/{naming.claim_name(GATEWAY_NS, 'red')}", ok(claim(holder)))

    assert await finalize(api, revoker, deleting()) == Done()

    assert (("DELETE", policy) in api.writes) is deleted


async def test_a_revocation_that_hangs_does_not_hold_the_pass() -> None:
    # maas-api accepts the call and answers only when the test says so (docs/contract.md §5.2).
    answer = asyncio.Event()

    async def handle(request: httpx.Request) -> httpx.Response:
        await answer.wait()
        return httpx.Response(200, json={"revokedCount": 2})

    revoker = KeyRevoker(ca_file=None, backoff=0.0, transport=httpx.MockTransport(handle))
    revocations = Revocations(revoker)
    woken: list[tuple[str, str]] = []
    revocations.wake = lambda namespace, name: woken.append((namespace, name))
    api = scripted()

    started = asyncio.get_running_loop().time()
    result = await finalize(api, revoker, deleting(), revocations=revocations)
    # The pass ends after the short grace, without blocking the deletion or deciding anything.
    assert result == RequeueAfter(REQUEUE_REVOCATION)
    assert asyncio.get_running_loop().time() - started < 1
    assert ready(last_status(api))["reason"] == "DeletionInProgress"
    assert ("PATCH", f"{TENANTS}/red") not in api.writes, "the finalizer stays"
    assert revocations.running() == 1
    # A pass meanwhile finds it still running and starts no second call.
    assert await finalize(scripted(), revoker, deleting(), revocations=revocations) == RequeueAfter(
        REQUEUE_REVOCATION
    )
    assert revocations.running() == 1

    answer.set()  # maas-api answers: the tenant is woken, and its next pass reads the outcome
    for _ in range(100):
        if woken:
            break
        await asyncio.sleep(0.01)
    assert woken == [(NS, "red")]
    retry = scripted()
    retry.on("GET", f"{CONFIG}/default-tenant", ok(owned_config("x")))
    retry.on("PATCH", f"{CONFIG}/default-tenant", ok(owned_config("x")))
    retry.on("DELETE", f"{CONFIG}/default-tenant", ok({}))
    assert await finalize(retry, revoker, deleting(), revocations=revocations) == RequeueAfter(5)
    revoked = next(c for c in last_status(retry)["conditions"] if c["type"] == "APIKeysRevoked")
    assert revoked["message"] == "Tenant API keys were revoked (revokedCount=2)"
    assert revocations.running() == 0


async def test_a_forced_cleanup_cancels_a_running_revocation() -> None:
    async def handle(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("never answers")

    revoker = KeyRevoker(
        ca_file=None, backoff=0.0, timeout=0.2, transport=httpx.MockTransport(handle)
    )
    revocations = Revocations(revoker)
    api = scripted()
    await finalize(api, revoker, deleting(), revocations=revocations)
    assert revocations.running() == 1
    assert await finalize(scripted(), revoker, deleting(), minutes=11, revocations=revocations) == (
        Done()
    )
    await asyncio.sleep(0)
    assert revocations.running() == 0
