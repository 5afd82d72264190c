"""An Active AITenant against a real API server: it stays put, and drift is put right.

A pass over an Active tenant writes nothing; a status someone else wrote, a deleted
MaasTenantConfig, and edited or deleted tenant-admin Roles are put right at once; a tenant
admin's own edits to the config's spec are kept (docs/contract.md §3).
"""

from __future__ import annotations

import asyncio

import httpx2
import pytest
from lightkube import AsyncClient
from lightkube.resources.rbac_authorization_v1 import Role
from lightkube.types import PatchType

from aitenant import contract, naming
from aitenant.resources import AITenant, MaasTenantConfig
from aitenant.runtime.client.lightkube_private import http_client
from aitenant.runtime.control.controller import Key

from ..harness import AITENANT_NS, SUBSCRIPTION_NS, RunningController, eventually
from ..tenants import (
    Names,
    get_tenant,
    informer_caught_up,
    make_tenant,
    ready,
    sentinel_reconcile,
    wait_phase,
)

pytestmark = pytest.mark.e2e


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
