"""The status writer both reconcilers share, against a scripted API."""

from __future__ import annotations

from typing import Any

from aitenant import contract
from aitenant.controllers.status import StatusWriter
from aitenant.resources import AITenant, MaasTenantConfig
from aitenant.runtime.client.events import EventRecorder

from ..scripted_api import ScriptedApi, echo, ok, status
from .aitenant.test_reconciler import EVENTS, TENANTS, tenant

CONFIGS = "/apis/maas.opendatahub.io/v1alpha1/namespaces/ai-tenant-red/maastenantconfigs"


def config(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": contract.API_VERSION,
        "kind": "MaasTenantConfig",
        "metadata": {
            "name": "default-tenant",
            "namespace": "ai-tenant-red",
            "generation": 1,
            "resourceVersion": "5",
        },
        **extra,
    }


def conflict() -> Any:
    return status(409, "Conflict", "the object has been modified")


async def test_nothing_changed_writes_nothing() -> None:
    api = ScriptedApi()
    writer = StatusWriter(api.client(), MaasTenantConfig, config(), 1, lambda _o: None, events=None)
    assert not await writer.flush()
    assert api.sent == []


async def test_config_status_is_written_once_and_without_an_event() -> None:
    api = ScriptedApi().on("UPDATE", f"{CONFIGS}/default-tenant/status", echo(200, rv="6"))
    remembered: list[dict[str, Any]] = []
    writer = StatusWriter(
        api.client(), MaasTenantConfig, config(), 1, remembered.append, events=None
    )
    writer.set_phase(contract.PHASE_ACTIVE, "Reconciled", "done")
    assert await writer.flush()
    assert not await writer.flush()  # as written: nothing to do
    assert api.requests() == [("UPDATE", f"{CONFIGS}/default-tenant/status")]
    assert [o["metadata"]["resourceVersion"] for o in remembered] == ["6"]


async def test_a_conflict_writes_over_the_latest_copy_and_announces_the_change() -> None:
    path = f"{TENANTS}/red"
    latest = tenant("red", resourceVersion="9")
    api = (
        ScriptedApi()
        .on("UPDATE", f"{path}/status", conflict(), echo(200, rv="10"))
        .on("GET", path, ok(latest))
        .on("CREATE", EVENTS, echo())
    )
    client = api.client()
    writer = StatusWriter(
        client,
        AITenant,
        tenant("red"),
        1,
        lambda _o: None,
        events=EventRecorder(client, component="t"),
    )
    writer.set_phase(contract.PHASE_FAILED, "GatewayCheckFailed", "no gateway")
    assert await writer.flush()
    retried = api.bodies("UPDATE", f"{path}/status")[-1]
    assert retried["metadata"]["resourceVersion"] == "9"
    assert retried["status"]["phase"] == contract.PHASE_FAILED
    (event,) = api.bodies("CREATE", EVENTS)
    assert (event["type"], event["reason"]) == ("Warning", "GatewayCheckFailed")


async def test_a_conflict_with_a_copy_that_already_holds_the_status_writes_nothing_more() -> None:
    path = f"{CONFIGS}/default-tenant"
    api = ScriptedApi().on("UPDATE", f"{path}/status", conflict())
    writer = StatusWriter(api.client(), MaasTenantConfig, config(), 1, lambda _o: None, events=None)
    writer.set_phase(contract.PHASE_ACTIVE, "Reconciled", "done")
    api.on("GET", path, ok(config(status=writer.status)))
    assert not await writer.flush()
    assert api.requests() == [("UPDATE", f"{path}/status"), ("GET", path)]
    assert not await writer.flush()  # the latest copy is now what was written
