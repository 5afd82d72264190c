"""The AITenant create path against a real API server (docs/contract.md §3)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
from devtools import samples
from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Event, Namespace
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding
from lightkube.types import PatchType

from aitenant import contract, naming
from aitenant.resources import AITenant, Gateway, MaasTenantConfig
from aitenant.runtime.client.lightkube_private import http_client
from aitenant.runtime.control.controller import Key, Retry

from ..conftest import (
    AITENANT_NS,
    GATEWAY_NS,
    INFRA_NS,
    SUBSCRIPTION_NS,
    Names,
    RunningController,
    eventually,
    get_tenant,
    informer_caught_up,
    make_tenant,
    ready,
    sentinel_reconcile,
    wait_phase,
)

pytestmark = pytest.mark.e2e


async def test_happy_path_reaches_active_with_every_child(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("happy")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)

    obj = await wait_phase(kube, name, "Active")

    # Status: phase, namespace, gateway ref, Ready condition at the current generation.
    status = obj["status"]
    assert status["tenantNamespace"] == tns
    assert status["gatewayRef"] == {"name": name, "namespace": GATEWAY_NS}
    cond = ready(obj)
    assert cond["status"] == "True"
    assert cond["reason"] == "Reconciled"
    assert cond["message"] == "AITenant bootstrap resources are reconciled"
    assert cond["observedGeneration"] == obj["metadata"]["generation"]
    assert contract.AITENANT_FINALIZER in obj["metadata"]["finalizers"]

    expected_labels = {
        "app.kubernetes.io/managed-by": "maas-controller",
        "app.kubernetes.io/part-of": "modelsasservice",
        "maas.opendatahub.io/managed-by-aitenant": "true",
        "ai-gateway.opendatahub.io/tenant": name,
        "maas.opendatahub.io/tenant-name": name,
        "maas.opendatahub.io/tenant-namespace": tns,
        "maas.opendatahub.io/gateway-access": "true",
    }
    expected_annotations = {
        "maas.opendatahub.io/aitenant-name": name,
        "maas.opendatahub.io/aitenant-namespace": AITENANT_NS,
    }

    # Namespace created by us: tenant metadata plus the created-by markers.
    ns = await kube.get(Namespace, tns)
    assert ns.metadata is not None
    labels, annotations = ns.metadata.labels or {}, ns.metadata.annotations or {}
    assert expected_labels.items() <= labels.items()
    assert labels["opendatahub.io/generated-namespace"] == "true"
    assert expected_annotations.items() <= annotations.items()
    assert annotations["maas.opendatahub.io/created-by-aitenant"] == "true"

    # MaasTenantConfig: metadata only, empty spec, no gateway or OIDC copied in.
    config = await kube.get(MaasTenantConfig, "default-tenant", namespace=tns)
    assert expected_labels.items() <= config["metadata"]["labels"].items()
    assert expected_annotations.items() <= config["metadata"]["annotations"].items()
    assert not config.get("spec")

    # Roles with exactly upstream's rules; no RoleBindings.
    admin = await kube.get(Role, f"aitenant-{name}-tenant-admin", namespace=tns)
    assert [r.to_dict() for r in admin.rules or []] == [
        {
            "apiGroups": ["maas.opendatahub.io"],
            "resources": ["maasauthpolicies", "maassubscriptions"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        },
        {
            "apiGroups": ["maas.opendatahub.io"],
            "resources": ["maastenantconfigs"],
            "resourceNames": ["default-tenant"],
            "verbs": ["get", "update", "patch"],
        },
        {
            "apiGroups": ["maas.opendatahub.io"],
            "resources": ["maasmodelrefs"],
            "verbs": ["get", "list", "watch"],
        },
    ]
    assert admin.metadata is not None
    assert expected_labels.items() <= (admin.metadata.labels or {}).items()
    obj_admin = await kube.get(Role, f"aitenant-{name}-object-admin", namespace=AITENANT_NS)
    assert [r.to_dict() for r in obj_admin.rules or []] == [
        {
            "apiGroups": ["maas.opendatahub.io"],
            "resources": ["aitenants"],
            "resourceNames": [name],
            "verbs": ["get"],
        }
    ]
    assert obj_admin.metadata is not None
    assert (obj_admin.metadata.labels or {})["maas.opendatahub.io/tenant-namespace"] == tns
    for namespace in (tns, AITENANT_NS):
        bindings = [
            b
            async for b in kube.list(RoleBinding, namespace=namespace)
            if b.metadata and (b.metadata.name or "").startswith(f"aitenant-{name}")
        ]
        assert bindings == []

    # Gateway claim with a controller ownerReference to the AITenant.
    claim = await kube.get(ConfigMap, naming.claim_name(GATEWAY_NS, name), namespace=AITENANT_NS)
    assert claim.data == {"gatewayNamespace": GATEWAY_NS, "gatewayName": name}
    assert claim.metadata is not None
    assert (claim.metadata.labels or {})["maas.opendatahub.io/gateway-claim"] == "true"
    owner = (claim.metadata.ownerReferences or [])[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller, owner.blockOwnerDeletion) == (
        "AITenant",
        name,
        obj["metadata"]["uid"],
        True,
        True,
    )

    # The Gateway was only read.
    gw = await kube.get(Gateway, name, namespace=GATEWAY_NS)
    assert gw["metadata"]["generation"] == 1
    assert not gw["metadata"].get("labels")
    assert not gw["metadata"].get("annotations")

    # Events (docs/differences.md D8): Pending then Active, both Normal.
    async def events() -> list[tuple[str, str]]:
        got = [
            (e.type or "", e.reason or "")
            async for e in kube.list(
                Event, namespace=AITENANT_NS, fields={"involvedObject.name": name}
            )
        ]
        assert ("Normal", "Reconciled") in got
        return got

    got = await eventually(events)
    assert ("Normal", "TenantConfigNotReady") in got


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


async def test_adopts_preexisting_namespace_without_created_by_markers(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("adopt")
    tns = f"ai-tenant-{name}"
    await kube.create(
        Namespace(metadata=ObjectMeta(name=tns, labels={"customer.example.com/team": "red"}))
    )
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    ns = await kube.get(Namespace, tns)
    assert ns.metadata is not None
    labels, annotations = ns.metadata.labels or {}, ns.metadata.annotations or {}
    assert labels["customer.example.com/team"] == "red"
    assert labels["maas.opendatahub.io/tenant-name"] == name
    assert annotations["maas.opendatahub.io/aitenant-name"] == name
    assert "opendatahub.io/generated-namespace" not in labels
    assert "maas.opendatahub.io/created-by-aitenant" not in annotations


async def test_namespace_owned_by_another_aitenant_is_refused(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("stolen")
    tns = f"ai-tenant-{name}"
    await kube.create(
        Namespace(
            metadata=ObjectMeta(
                name=tns,
                annotations={
                    "maas.opendatahub.io/aitenant-name": "someone-else",
                    "maas.opendatahub.io/aitenant-namespace": AITENANT_NS,
                },
            )
        )
    )
    await make_tenant(kube, name)
    obj = await wait_phase(kube, name, "Failed", "TenantNamespaceFailed")
    assert ready(obj)["message"] == f'tenant namespace "{tns}" is managed by another AITenant'
    ns = await kube.get(Namespace, tns)
    assert ns.metadata is not None
    assert (ns.metadata.annotations or {})["maas.opendatahub.io/aitenant-name"] == "someone-else"
    assert "maas.opendatahub.io/tenant-name" not in (ns.metadata.labels or {})


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


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        (
            "default",
            "AITenant default/{name} must be created in the configured AITenant infrastructure "
            'namespace "ai-tenants"',
        ),
        (
            INFRA_NS,
            f"AITenant {INFRA_NS}/{{name}} must not be created in the protected application "
            f'namespace "{INFRA_NS}"',
        ),
        (
            SUBSCRIPTION_NS,
            f"AITenant {SUBSCRIPTION_NS}/{{name}} must be created in a separate infra namespace, "
            f'not the tenant namespace "{SUBSCRIPTION_NS}"',
        ),
    ],
)
async def test_invalid_placement(
    kube: AsyncClient,
    controller: RunningController,
    unique: Names,
    namespace: str,
    message: str,
) -> None:
    name = unique("misplaced")
    await samples.ensure_namespace(kube, namespace)
    await samples.create_aitenant(kube, samples.aitenant(name, namespace))

    async def failed() -> dict[str, Any] | None:
        obj = dict(await kube.get(AITenant, name, namespace=namespace))
        return obj if ready(obj).get("reason") == "InvalidPlacement" else None

    obj = await eventually(failed)
    assert obj["status"]["phase"] == "Failed"
    assert ready(obj)["message"] == message.format(name=name)
    assert "tenantNamespace" not in obj["status"]
    # The finalizer comes first, as upstream (so deletion cleanup still runs).
    assert contract.AITENANT_FINALIZER in obj["metadata"]["finalizers"]
    # No requeue: the pass that wrote Failed scheduled nothing (its outcome is Done).
    key = Key(namespace, name)

    async def settled() -> bool:
        return controller.settled(key)

    await eventually(settled)


async def test_reconcile_of_active_tenant_makes_no_write(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("idle")
    await make_tenant(kube, name)
    before = await wait_phase(kube, name, "Active")
    await informer_caught_up(controller, before)  # the pass starts from the last status write
    assert controller.app is not None
    # Only the requests this pass sends count: the controller's workers keep converging other
    # objects meanwhile (this tenant's platform among them), so a process-wide count of writes
    # would also see theirs. The pass runs in this task and awaits each request (Events too).
    passes = controller.reconciled.count(Key(AITENANT_NS, name))
    sent: list[tuple[str, str]] = []
    this_task = asyncio.current_task()

    async def record(request: httpx2.Request) -> None:
        if asyncio.current_task() is this_task:
            sent.append((request.method, request.url.path))

    hooks = http_client(controller.app.client).event_hooks["request"]
    hooks.append(record)
    try:
        await controller.app.aitenant_controller.process(Key(AITENANT_NS, name))
    finally:
        hooks.remove(record)
    assert controller.reconciled.count(Key(AITENANT_NS, name)) == passes + 1  # it did run
    assert sent == [], "no write, and every read served from the informers"
    after = await get_tenant(kube, name)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["status"] == before["status"]


async def test_spec_rbac_admins_creates_no_rolebinding(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("rbac")
    tns = f"ai-tenant-{name}"
    await make_tenant(
        kube,
        name,
        rbac_admins=[
            {"kind": "User", "name": "alice"},
            {"kind": "Group", "name": "admins"},
            {"kind": "ServiceAccount", "name": "bot", "namespace": "ci"},
        ],
    )
    await wait_phase(kube, name, "Active")
    for namespace in (tns, AITENANT_NS):
        names = [
            b.metadata.name async for b in kube.list(RoleBinding, namespace=namespace) if b.metadata
        ]
        assert not any(n and name in n for n in names)


async def test_a_status_someone_else_wrote_is_put_right_at_once(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """The status is ours: a status written by anyone else brings the AITenant (or its config)
    back at once, and is put right; our own status writes and metadata edits bring nothing."""
    name = unique("quiet")
    await make_tenant(kube, name)
    await informer_caught_up(controller, await wait_phase(kube, name, "Active"))
    key = Key(AITENANT_NS, name)

    async def idle() -> bool:
        return controller.settled(key)

    await eventually(idle)
    count = controller.reconciled.count(key)
    await kube.patch(
        AITenant,
        name,
        {"metadata": {"labels": {"example.com/touched": "yes"}}},
        namespace=AITENANT_NS,
        patch_type=PatchType.MERGE,
    )
    await sentinel_reconcile(kube, controller, unique)  # the edit's event was handled
    assert controller.reconciled.count(key) == count
    await kube.patch(
        AITenant.Status,
        name,
        {"status": {"phase": "Failed"}},
        namespace=AITENANT_NS,
        patch_type=PatchType.MERGE,
    )
    await wait_phase(kube, name, "Active", timeout=5)  # not at the next resync
    await eventually(idle)
    await sentinel_reconcile(kube, controller, unique)
    # The correction's own echo brings no pass, except when the watch delivers it before the
    # write's answer is remembered (Informer.ours cannot tell then): one more, writing nothing.
    corrected = controller.reconciled.count(key)
    assert count + 1 <= corrected <= count + 2
    await sentinel_reconcile(kube, controller, unique)
    assert controller.reconciled.count(key) == corrected, "and then nothing: no loop"
    # The config's status likewise (its reconciler has no 300 s wait for it any more).
    tns = naming.tenant_namespace_for(name, SUBSCRIPTION_NS)
    foreign = {
        "type": "Ready",
        "status": "False",
        "reason": "SomeoneElse",
        "message": "written by another controller",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    await kube.patch(
        MaasTenantConfig.Status,
        contract.TENANT_CONFIG_NAME,
        {"status": {"phase": "Failed", "conditions": [foreign]}},
        namespace=tns,
        patch_type=PatchType.MERGE,
    )

    async def config_ready_again() -> bool:
        config = await kube.get(MaasTenantConfig, contract.TENANT_CONFIG_NAME, namespace=tns)
        return ready(dict(config)).get("reason") == contract.ConfigReason.RECONCILED

    await eventually(config_ready_again, timeout=5)
    await wait_phase(kube, name, "Active", timeout=5)


async def test_deleted_config_is_recreated(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("recreate")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    first = await kube.get(MaasTenantConfig, "default-tenant", namespace=tns)
    await kube.delete(MaasTenantConfig, "default-tenant", namespace=tns)

    async def recreated() -> bool:
        config = await kube.get(MaasTenantConfig, "default-tenant", namespace=tns)
        return config["metadata"]["uid"] != first["metadata"]["uid"]

    await eventually(recreated)
    await wait_phase(kube, name, "Active")


async def test_tenant_admin_spec_edits_are_kept_and_labels_restored(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("edited")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    await kube.patch(
        MaasTenantConfig,
        "default-tenant",
        {
            "spec": {"apiKeys": {"maxExpirationDays": 30}},
            "metadata": {"labels": {"maas.opendatahub.io/tenant-name": None}},
        },
        namespace=tns,
        patch_type=PatchType.MERGE,
    )

    async def restored() -> bool:
        config = await kube.get(MaasTenantConfig, "default-tenant", namespace=tns)
        assert config["spec"] == {"apiKeys": {"maxExpirationDays": 30}}
        return config["metadata"]["labels"].get("maas.opendatahub.io/tenant-name") == name

    await eventually(restored)


async def test_edited_or_deleted_tenant_admin_roles_are_restored_at_once(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("roledrift")
    tns = f"ai-tenant-{name}"
    role_name = f"aitenant-{name}-tenant-admin"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    want = (await kube.get(Role, role_name, namespace=tns)).rules
    await kube.patch(
        Role,
        role_name,
        {"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}]},
        namespace=tns,
        patch_type=PatchType.MERGE,
    )

    async def rules_restored() -> bool:
        return (await kube.get(Role, role_name, namespace=tns)).rules == want

    # The Role informer re-queues the tenant: no resync, no other change needed.
    await eventually(rules_restored, timeout=10)
    await kube.delete(Role, f"aitenant-{name}-object-admin", namespace=AITENANT_NS)

    async def recreated() -> Role:
        return await kube.get(Role, f"aitenant-{name}-object-admin", namespace=AITENANT_NS)

    await eventually(recreated, timeout=10)


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


async def test_restart_mid_flight_converges(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    names = [unique("restart") for _ in range(6)]
    for name in names:
        await samples.create_gateway(kube, samples.gateway(name, GATEWAY_NS))
    await controller.stop()
    for name in names:
        await samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS))
    await controller.start()
    await asyncio.sleep(0.05)  # some tenants are half-way through their first pass
    await controller.stop()
    await controller.start()
    for name in names:
        await wait_phase(kube, name, "Active")
