"""The AITenant create path against a real API server (docs/contract.md §3).

A new AITenant reaches Active with every child object; a tenant namespace that already exists is
adopted (or refused when another AITenant owns it); a misplaced AITenant fails; `spec.rbac.admins`
binds nothing; a controller restarted mid-flight converges. Which Gateway a tenant uses is in
test_gateway_claims.py, what an Active tenant does when others edit its objects in
test_steady_state.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from devtools import samples
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Event, Namespace
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding

from aitenant import contract, naming
from aitenant.resources import AITenant, Gateway, MaasTenantConfig
from aitenant.runtime.control.controller import Key

from ..harness import (
    AITENANT_NS,
    GATEWAY_NS,
    INFRA_NS,
    SUBSCRIPTION_NS,
    RunningController,
    eventually,
)
from ..tenants import Names, make_tenant, ready, wait_phase

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
