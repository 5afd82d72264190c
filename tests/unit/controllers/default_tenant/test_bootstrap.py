"""The default-tenant bootstrap decisions (docs/contract.md §4.1, §4.2, docs/differences.md
D7)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aitenant import contract
from aitenant.controllers.default_tenant.bootstrap import (
    BootstrapPlan,
    DefaultTenantBootstrap,
    config_owner_reference,
    config_ref_state,
    default_tenant_body,
    link_patch,
    plan_bootstrap,
)
from aitenant.settings import Settings

MARKER = contract.ANNOTATION_DEFAULT_BOOTSTRAPPED


def config(*, uid: str = "cfg-1", marked: bool = False, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "default", "uid": uid, "resourceVersion": "7"}
    if marked:
        meta["annotations"] = {MARKER: "true"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": contract.API_VERSION, "kind": "Config", "metadata": meta}


def tenant(
    *,
    ready: bool = False,
    phase: str | None = None,
    deleting: bool = False,
    owner_uid: str | None = "cfg-1",
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": contract.DEFAULT_TENANT_NAME,
        "namespace": "ai-tenants",
        "resourceVersion": "42",
    }
    if owner_uid is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": contract.API_VERSION,
                "kind": "Config",
                "name": "default",
                "uid": owner_uid,
            }
        ]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if ready or phase:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"metadata": meta, "status": status}


@pytest.mark.parametrize(
    ("cfg", "ait", "expected"),
    [
        # docs/differences.md D7: the anchor is created first.
        (None, None, BootstrapPlan(create_config=True)),
        (None, tenant(), BootstrapPlan(create_config=True)),
        # Config not usable yet.
        (config(deleting=True), None, BootstrapPlan()),
        (config(uid=""), None, BootstrapPlan()),
        # Missing tenant: created once per Config lifecycle.
        (config(), None, BootstrapPlan(create_tenant=True)),
        (config(marked=True), None, BootstrapPlan()),
        # Present and Ready: the marker, written only now.
        (config(), tenant(ready=True, phase="Active"), BootstrapPlan(mark=True)),
        (config(marked=True), tenant(ready=True, phase="Active"), BootstrapPlan()),
        # Present but not Ready, or on its way out: no marker.
        (config(), tenant(), BootstrapPlan()),
        (config(), tenant(phase="Pending"), BootstrapPlan()),
        (config(), tenant(phase="Failed"), BootstrapPlan()),
        (config(), tenant(ready=True, phase="Terminating"), BootstrapPlan()),
        (config(), tenant(ready=True, phase="Active", deleting=True), BootstrapPlan()),
        # docs/contract.md §4.2: a tenant without the Config ownerReference gets it (and the
        # marker if Ready).
        (config(), tenant(owner_uid=None), BootstrapPlan(link_tenant=True)),
        (
            config(),
            tenant(owner_uid=None, ready=True, phase="Active"),
            BootstrapPlan(link_tenant=True, mark=True),
        ),
        # A tenant of an earlier Config lifecycle is the garbage collector's: hands off.
        (config(uid="cfg-2"), tenant(ready=True, phase="Active"), BootstrapPlan()),
    ],
)
def test_decision_table(
    cfg: dict[str, Any] | None, ait: dict[str, Any] | None, expected: BootstrapPlan
) -> None:
    plan = plan_bootstrap(cfg, ait)
    assert (plan.create_config, plan.create_tenant, plan.link_tenant, plan.mark) == (
        expected.create_config,
        expected.create_tenant,
        expected.link_tenant,
        expected.mark,
    ), plan.note
    assert plan.note


def test_notes_say_why_nothing_happens() -> None:
    assert "not recreated" in plan_bootstrap(config(marked=True), None).note
    assert "earlier Config" in plan_bootstrap(config(uid="cfg-2"), tenant()).note


def test_owner_reference_is_not_a_controller_reference() -> None:
    ref = config_owner_reference(config())
    assert ref == {
        "apiVersion": "maas.opendatahub.io/v1alpha1",
        "kind": "Config",
        "name": "default",
        "uid": "cfg-1",
    }


def ref(api_version: str, kind: str = "Config", name: str = "default", uid: str = "cfg-1") -> Any:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}


@pytest.mark.parametrize(
    ("refs", "state"),
    [
        ([], "missing"),
        ([ref("v1", kind="ConfigMap")], "missing"),
        ([ref("other.io/v1")], "missing"),
        ([ref("maas.opendatahub.io/v1", name="x")], "missing"),
        ([ref("maas.opendatahub.io/v1")], "current"),
        ([ref("maas.opendatahub.io/v1alpha1", uid="old")], "stale"),
        (
            [ref("maas.opendatahub.io/v1alpha1", uid="old"), ref("maas.opendatahub.io/v1")],
            "current",
        ),
    ],
)
def test_config_ref_state(refs: list[dict[str, str]], state: str) -> None:
    assert config_ref_state({"metadata": {"ownerReferences": refs}}, "cfg-1") == state


def test_link_patch_keeps_other_owners_and_locks_on_resource_version() -> None:
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u"}
    obj = {"metadata": {"name": "n", "ownerReferences": [other], "resourceVersion": "5"}}
    patch = link_patch(obj, config())
    assert patch == {
        "metadata": {
            "ownerReferences": [other, config_owner_reference(config())],
            "resourceVersion": "5",
        }
    }


def test_created_tenant_uses_the_flag_gateway_and_points_at_the_config() -> None:
    body = default_tenant_body(
        config=config(), aitenant_namespace="ai-tenants", gateway_name="gw", legacy_tenant=None
    )
    assert body == {
        "apiVersion": "maas.opendatahub.io/v1alpha1",
        "kind": "AITenant",
        "metadata": {
            "name": "models-as-a-service",
            "namespace": "ai-tenants",
            # Kept by `juju remove-application` (docs/design.md §7.1).
            "labels": {"model.juju.is/disable-webhook": "true"},
            "ownerReferences": [config_owner_reference(config())],
        },
        "spec": {"gateway": {"name": "gw"}},
    }


def test_created_tenant_takes_gateway_name_and_oidc_from_a_legacy_tenant() -> None:
    legacy = {
        "metadata": {"name": "default-tenant", "namespace": "models-as-a-service"},
        "spec": {
            # A foreign namespace is kept on purpose: the reconciler reports the mismatch.
            "gatewayRef": {"namespace": "elsewhere", "name": "custom-gw"},
            "externalOIDC": {"issuerUrl": "https://idp.example", "clientId": "maas", "ttl": 60},
        },
    }
    body = default_tenant_body(
        config=config(), aitenant_namespace="ai-tenants", gateway_name="gw", legacy_tenant=legacy
    )
    assert body["spec"] == {
        "gateway": {"name": "custom-gw"},
        "oidc": {"issuerUrl": "https://idp.example", "clientId": "maas", "ttl": 60},
    }


def test_legacy_tenant_without_gateway_name_keeps_the_flag_gateway() -> None:
    legacy = {"metadata": {}, "spec": {"gatewayRef": {"namespace": "gws"}}}
    body = default_tenant_body(
        config=config(), aitenant_namespace="ai-tenants", gateway_name="gw", legacy_tenant=legacy
    )
    assert body["spec"] == {"gateway": {"name": "gw"}}


def test_legacy_oidc_the_aitenant_would_refuse_is_left_out_of_the_default_tenant() -> None:
    # The create then succeeds and the tenant reports LegacyTenantMigrationFailed instead.
    oidc = {"issuerUrl": "https://idp.example", "clientId": "maas", "ttl": 10}
    legacy = {"metadata": {}, "spec": {"gatewayRef": {"name": "custom-gw"}, "externalOIDC": oidc}}
    body = default_tenant_body(
        config=config(), aitenant_namespace="ai-tenants", gateway_name="gw", legacy_tenant=legacy
    )
    assert body["spec"] == {"gateway": {"name": "custom-gw"}}


async def test_a_stop_that_arrives_as_the_loop_wakes_is_not_lost() -> None:
    """The manager stops the loop by cancelling it; a cancellation that came with a wake-up
    (the bootstrap's own writes wake it) was swallowed, and the loop outlived its manager."""
    ticked = asyncio.Event()

    async def tick() -> BootstrapPlan:
        ticked.set()
        return BootstrapPlan(note="nothing to do")

    bootstrap = DefaultTenantBootstrap(client=Any, settings=Settings(), interval=30)  # type: ignore[arg-type]
    bootstrap.tick = tick  # type: ignore[method-assign]
    task = asyncio.create_task(bootstrap.run())
    await ticked.wait()
    await asyncio.sleep(0.01)  # waiting for the next wake-up
    bootstrap.wake()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 1)
