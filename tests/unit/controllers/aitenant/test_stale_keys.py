"""Keys left under a tenant's name are revoked before it is first Active (docs/contract.md §5.2)."""

from __future__ import annotations

from typing import Any

import pytest

from aitenant import contract
from aitenant.controllers import conditions
from aitenant.controllers.aitenant.revocation import KeyRevoker, RevocationError, Revocations
from aitenant.controllers.aitenant.stale_keys import StaleKeys
from aitenant.controllers.status import StatusWriter
from aitenant.errors import StepFailed
from aitenant.resources import AITenant, AITenantView
from aitenant.runtime.client.events import EventRecorder
from aitenant.settings import Settings

from ...scripted_api import ScriptedApi

SETTINGS = Settings(
    aitenant_namespace="ai-tenants",
    gateway_namespace="gateways",
    controller_namespace="aitenant-system",
    maas_api_url_template="https://maas-api.test/{tenant}/api-keys",
)


class StandIn(KeyRevoker):
    def __init__(self, answer: int | RevocationError) -> None:
        super().__init__(ca_file=None)
        self.answer = answer
        self.calls: list[str] = []

    async def revoke(self, url: str, *, attempts: int | None = None) -> int:
        self.calls.append(url)
        if isinstance(self.answer, RevocationError):
            raise self.answer
        return self.answer


def tenant(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": contract.API_VERSION,
        "kind": "AITenant",
        "metadata": {"name": "red", "namespace": "ai-tenants", "uid": "u1", "generation": 1},
        "spec": {},
        "status": status or {},
    }


async def judge(obj: dict[str, Any], revoker: StandIn) -> tuple[bool, StatusWriter]:
    stale = StaleKeys(revocations=Revocations(revoker), settings=SETTINGS)
    client = ScriptedApi().client()
    events = EventRecorder(client, component="unit-tests")
    writer = StatusWriter(client, AITenant, obj, 1, lambda _: None, events=events)
    return await stale.revoked(AITenantView(obj), writer), writer


async def test_a_new_tenant_revokes_what_its_name_left_and_records_it() -> None:
    revoker = StandIn(3)
    done, writer = await judge(tenant(), revoker)
    assert done
    assert revoker.calls == ["https://maas-api.test/red/api-keys"]
    cond = conditions.find_condition(writer.status, contract.CONDITION_STALE_API_KEYS_REVOKED)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("True", "Revoked")
    assert cond["message"] == (
        "API keys left under this tenant's name were revoked before it was first Active "
        "(revokedCount=3)"
    )
    # Recorded: the next pass makes no call.
    again, _ = await judge(tenant(writer.status), revoker)
    assert again
    assert len(revoker.calls) == 1


async def test_a_tenant_active_before_keeps_its_keys() -> None:
    revoker = StandIn(3)
    done, writer = await judge(tenant({"phase": "Active"}), revoker)
    assert done
    assert revoker.calls == []
    cond = conditions.find_condition(writer.status, contract.CONDITION_STALE_API_KEYS_REVOKED)
    assert cond is not None
    assert cond["reason"] == "ProvisionedEarlier"


async def test_a_failed_revocation_keeps_the_tenant_pending() -> None:
    revoker = StandIn(RevocationError("API key revocation via DELETE x failed: HTTP 503: "))
    with pytest.raises(StepFailed) as failed:
        await judge(tenant(), revoker)
    assert failed.value.reason == "StaleAPIKeysRevocationFailed"
    assert failed.value.phase == "Pending"
    assert "HTTP 503" in failed.value.message
