"""AITenant deletion against a real API server (docs/contract.md §5, docs/differences.md D2)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
from devtools import samples
from devtools.cluster import LocalCluster
from devtools.maas_api import FakeMaasApi
from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.core_v1 import ConfigMap, Event, Namespace, Secret
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding
from lightkube.types import PatchType

from aitenant import naming
from aitenant.platform import kinds
from aitenant.resources import (
    AITenant,
    Gateway,
    MaaSAuthPolicy,
    MaaSSubscription,
    MaasTenantConfig,
)
from aitenant.runtime.client.lightkube_private import http_client
from aitenant.runtime.client.transport import is_watch
from aitenant.runtime.control.controller import Key, RequeueAfter

from ..harness import AITENANT_NS, GATEWAY_NS, INFRA_NS, RunningController, e2e_settings, eventually
from ..tenants import Names, get_tenant, informer_caught_up, make_tenant, ready, wait_phase

pytestmark = pytest.mark.e2e

GATEWAY_AUTH_POLICY = kinds.AUTH_POLICY.resource


async def gone(kube: AsyncClient, kind: Any, name: str, namespace: str | None = None) -> bool:
    try:
        if namespace is None:
            await kube.get(kind, name)
        else:
            await kube.get(kind, name, namespace=namespace)
    except ApiError as exc:
        return exc.status.code == 404
    return False


async def wait_gone(kube: AsyncClient, name: str, timeout: float = 20) -> None:
    async def check() -> bool:
        return await gone(kube, AITenant, name, AITENANT_NS)

    await eventually(check, timeout=timeout)


async def events_of(kube: AsyncClient, name: str) -> list[tuple[str, str, str]]:
    return [
        (e.type or "", e.reason or "", e.message or "")
        async for e in kube.list(Event, namespace=AITENANT_NS, fields={"involvedObject.name": name})
    ]


async def test_deletion_revokes_cleans_and_keeps_user_objects(
    kube: AsyncClient, controller: RunningController, maas_api: FakeMaasApi, unique: Names
) -> None:
    name = unique("goodbye")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    maas_api.keys[name] = 3  # minted while it is Active

    # What users and other MaaS controllers put around the tenant.
    await kube.patch(
        Namespace,
        tns,
        {"metadata": {"labels": {"customer.example.com/team": "blue"}}},
        patch_type=PatchType.MERGE,
    )
    await kube.create(Secret(metadata=ObjectMeta(name="user-secret", namespace=tns)))
    await kube.create(
        RoleBinding(
            metadata=ObjectMeta(name="alice-admin", namespace=tns),
            roleRef=RoleRef(
                apiGroup="rbac.authorization.k8s.io",
                kind="Role",
                name=f"aitenant-{name}-tenant-admin",
            ),
            subjects=[Subject(kind="User", name="alice", apiGroup="rbac.authorization.k8s.io")],
        )
    )
    await kube.create(MaaSSubscription.from_dict(samples.maas_subscription("sub", tns)))
    await kube.create(MaaSAuthPolicy.from_dict(samples.maas_auth_policy("pol", tns)))
    # The tenant platform created the Gateway's AuthPolicy (create-if-missing).
    await kube.get(GATEWAY_AUTH_POLICY, f"{name}-maas-auth", namespace=GATEWAY_NS)
    gateway_before = await kube.get(Gateway, name, namespace=GATEWAY_NS)

    await kube.delete(AITenant, name, namespace=AITENANT_NS)
    await wait_gone(kube, name)

    assert maas_api.revocations(name) == [0, 3], "at provisioning (none left), at deletion"
    assert await gone(kube, MaasTenantConfig, "default-tenant", tns)
    assert await gone(kube, MaaSSubscription, "sub", tns)
    assert await gone(kube, MaaSAuthPolicy, "pol", tns)
    assert await gone(kube, Role, f"aitenant-{name}-tenant-admin", tns)
    assert await gone(kube, Role, f"aitenant-{name}-object-admin", AITENANT_NS)
    assert await gone(kube, GATEWAY_AUTH_POLICY, f"{name}-maas-auth", GATEWAY_NS)
    assert await gone(kube, ConfigMap, naming.claim_name(GATEWAY_NS, name), AITENANT_NS)

    # Kept: the namespace (released), the user's objects, the Gateway untouched.
    ns = await kube.get(Namespace, tns)
    assert ns.metadata is not None
    labels, annotations = ns.metadata.labels or {}, ns.metadata.annotations or {}
    assert labels.get("customer.example.com/team") == "blue"
    assert not [k for k in labels if k.startswith("maas.opendatahub.io/")]
    assert "ai-gateway.opendatahub.io/tenant" not in labels
    assert "opendatahub.io/generated-namespace" not in labels
    assert not [k for k in annotations if k.startswith("maas.opendatahub.io/")]
    await kube.get(Secret, "user-secret", namespace=tns)
    await kube.get(RoleBinding, "alice-admin", namespace=tns)
    gateway_after = await kube.get(Gateway, name, namespace=GATEWAY_NS)
    assert (
        gateway_after["metadata"]["resourceVersion"]
        == gateway_before["metadata"]["resourceVersion"]
    )

    reasons = [r for _, r, _ in await events_of(kube, name)]
    assert "DeletionInProgress" in reasons


async def test_a_deletion_reads_from_the_api_only_what_no_informer_holds(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("cheap")
    await make_tenant(kube, name)
    await informer_caught_up(controller, await wait_phase(kube, name, "Active"))
    assert controller.app is not None
    reads: list[str] = []

    async def record(request: httpx2.Request) -> None:
        if request.method == "GET" and not is_watch(request):
            reads.append(request.url.path)

    hooks = http_client(controller.app.client).event_hooks["request"]
    hooks.append(record)
    try:
        await kube.delete(AITenant, name, namespace=AITENANT_NS)
        await wait_gone(kube, name)
    finally:
        hooks.remove(record)

    # Every read that concerns this tenant (other tests' tenants may still be converging):
    # its objects carry its name; the claims and the infra namespace are read by every deletion.
    shared = (f"/api/v1/namespaces/{AITENANT_NS}/configmaps", f"/api/v1/namespaces/{INFRA_NS}")
    ours = [path for path in reads if name in path or path in shared]
    # Legacy RoleBindings (nothing watches them) and the MaaS objects the config cleanup
    # deletes (lists of kinds other controllers own) are the only reads left.
    allowed = ("/rolebindings/", "/maassubscriptions", "/maasauthpolicies")
    assert [path for path in ours if not any(part in path for part in allowed)] == []
    assert any("/rolebindings/" in path for path in ours), "the hook saw the deletion"


async def test_unreachable_maas_api_blocks_deletion_until_it_answers(
    kube: AsyncClient, controller: RunningController, maas_api: FakeMaasApi, unique: Names
) -> None:
    name = unique("blocked")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    maas_api.keys[name] = 2
    maas_api.fail_status = 503
    try:
        await kube.delete(AITenant, name, namespace=AITENANT_NS)
        obj = await wait_phase(kube, name, "Terminating", "DeletionBlocked")
        message = ready(obj)["message"]
        assert f"/internal/v1/tenants/{name}/api-keys" in message
        assert "HTTP 503" in message
        # Nothing was cleaned while keys may still be valid.
        await kube.get(MaasTenantConfig, "default-tenant", namespace=tns)
        await kube.get(Role, f"aitenant-{name}-tenant-admin", namespace=tns)

        async def warned() -> bool:
            return any(
                t == "Warning" and r == "DeletionBlocked" for t, r, _ in await events_of(kube, name)
            )

        await eventually(warned)
        # It stays blocked while it retries, never back through DeletionInProgress
        # (docs/differences.md D28).
        for _ in range(20):
            await asyncio.sleep(0.1)
            assert ready(await get_tenant(kube, name))["reason"] == "DeletionBlocked"
    finally:
        maas_api.fail_status = None
    await wait_gone(kube, name, timeout=60)
    assert [n for n in maas_api.revocations(name) if n >= 0] == [0, 2]


async def test_revocations_hanging_on_maas_api_do_not_hold_the_workers(
    kube: AsyncClient, controller: RunningController, maas_api: FakeMaasApi, unique: Names
) -> None:
    """16 deletions whose maas-api accepts TLS and never answers (twice the workers); a tenant
    created meanwhile is Active in its usual time (docs/contract.md §5.2)."""
    names = [unique("hang") for _ in range(16)]
    for name in names:
        await make_tenant(kube, name)
    for name in names:
        await wait_phase(kube, name, "Active")
    loop = asyncio.get_running_loop()
    maas_api.hold(names)
    try:
        for name in names:
            await kube.delete(AITenant, name, namespace=AITENANT_NS)
        await asyncio.sleep(3)
        fresh = unique("fresh")
        started = loop.time()
        await make_tenant(kube, fresh)
        await wait_phase(kube, fresh, "Active")
        to_active = loop.time() - started
        print(f"\nnew tenant Active {to_active:.2f} s after its create, 16 revocations hanging")
        assert to_active < 10
        for name in names:  # still waiting for maas-api, nothing cleaned yet
            assert (await get_tenant(kube, name))["status"]["phase"] == "Terminating"
            await kube.get(MaasTenantConfig, "default-tenant", namespace=f"ai-tenant-{name}")
    finally:
        maas_api.release(names)
    for name in names:  # maas-api answers again: each deletion finishes
        await wait_gone(kube, name, timeout=90)


async def test_revocation_is_recorded_once_and_not_repeated_after_restart(
    kube: AsyncClient, controller: RunningController, maas_api: FakeMaasApi, unique: Names
) -> None:
    name = unique("once")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    maas_api.keys[name] = 4
    # A MaaSSubscription whose own controller is slow to let go holds the config cleanup.
    sub = samples.maas_subscription("slow", tns, finalizers=["example.com/slow"])
    await kube.create(MaaSSubscription.from_dict(sub))
    await kube.delete(AITenant, name, namespace=AITENANT_NS)

    async def revoked() -> dict[str, Any] | None:
        obj = await get_tenant(kube, name)
        conds = {c["type"]: c for c in obj["status"].get("conditions", [])}
        cond = conds.get("APIKeysRevoked")
        return cond if cond and cond["status"] == "True" else None

    cond = await eventually(revoked)
    assert cond["reason"] == "Revoked"
    assert cond["message"] == "Tenant API keys were revoked (revokedCount=4)"

    await controller.stop()
    key = Key(AITENANT_NS, name)
    before = len(controller.results)
    await controller.start()

    async def waiting_on_cleanup() -> bool:
        # The restarted controller has finished a pass over the tenant, which waits for the
        # config's cleanup (held by the slow finalizer) instead of finishing the deletion.
        return any(k == key and isinstance(r, RequeueAfter) for k, r in controller.results[before:])

    await eventually(waiting_on_cleanup)
    assert not await gone(kube, AITenant, name, AITENANT_NS)
    await kube.patch(
        MaaSSubscription,
        "slow",
        {"metadata": {"finalizers": None}},
        namespace=tns,
        patch_type=PatchType.MERGE,
    )
    await wait_gone(kube, name)
    assert maas_api.revocations(name) == [0, 4]


async def test_unmanaged_gateway_auth_policy_is_kept(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("optout")
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    # The platform created it; the administrator opts it out of management.
    await kube.patch(
        GATEWAY_AUTH_POLICY,
        f"{name}-maas-auth",
        {"metadata": {"annotations": {"opendatahub.io/managed": "false"}}},
        namespace=GATEWAY_NS,
        patch_type=PatchType.MERGE,
    )
    await kube.delete(AITenant, name, namespace=AITENANT_NS)
    await wait_gone(kube, name)
    await kube.get(GATEWAY_AUTH_POLICY, f"{name}-maas-auth", namespace=GATEWAY_NS)


async def test_terminating_namespace_does_not_block_deletion(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("nsgone")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    # Hold the namespace in Terminating with a finalizer on its only content we control.
    await kube.patch(
        MaasTenantConfig,
        "default-tenant",
        {"metadata": {"finalizers": ["example.com/hold"]}},
        namespace=tns,
        patch_type=PatchType.MERGE,
    )
    await kube.delete(Namespace, tns)
    await kube.delete(AITenant, name, namespace=AITENANT_NS)

    async def config_released() -> bool:
        config = await kube.get(MaasTenantConfig, "default-tenant", namespace=tns)
        fins = config["metadata"].get("finalizers") or []
        return "maas.opendatahub.io/tenant-cleanup" not in fins and bool(
            config["metadata"].get("deletionTimestamp")
        )

    await eventually(config_released, timeout=20)
    await kube.patch(
        MaasTenantConfig,
        "default-tenant",
        {"metadata": {"finalizers": None}},
        namespace=tns,
        patch_type=PatchType.MERGE,
    )
    await wait_gone(kube, name, timeout=30)


async def test_deletion_timeout_forces_cleanup(
    cluster: LocalCluster,
    kube: AsyncClient,
    controller: RunningController,
    maas_api: FakeMaasApi,
    unique: Names,
) -> None:
    name = unique("forced")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    # Swap the session controller for one with a 2 s deletion timeout.
    await controller.stop()
    impatient = RunningController(cluster, e2e_settings(maas_api, deletion_timeout=2.0))
    await impatient.start()
    maas_api.fail_status = 500
    try:
        await kube.delete(AITenant, name, namespace=AITENANT_NS)
        await wait_gone(kube, name, timeout=30)
    finally:
        maas_api.fail_status = None
        await impatient.stop()
        await controller.start()
    events = await events_of(kube, name)
    forced = [m for t, r, m in events if (t, r) == ("Warning", "AITenantCleanupForced")]
    assert forced == [
        f"Deletion timeout (2s) reached for AITenant {AITENANT_NS}/{name}; cleanup finalizer "
        "removed without successful cleanup — API keys may still exist"
    ]
    # The forced path tried the revocation once, and says what it could not do.
    unrevoked = [m for t, r, m in events if (t, r) == ("Warning", "APIKeysNotRevoked")]
    assert len(unrevoked) == 1, events
    assert f"/internal/v1/tenants/{name}/api-keys failed: HTTP 500" in unrevoked[0]
    ns = await kube.get(Namespace, tns)
    assert ns.metadata is not None
    assert "maas.opendatahub.io/tenant-name" not in (ns.metadata.labels or {})
    assert await gone(kube, Role, f"aitenant-{name}-tenant-admin", tns)
