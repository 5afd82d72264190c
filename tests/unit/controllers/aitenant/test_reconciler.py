"""The AITenant reconciler's outcomes and writes, against a scripted API at the transport."""

from __future__ import annotations

import json
from typing import Any

from aitenant import contract, naming
from aitenant.controllers.aitenant.infra_labels import LEDGER
from aitenant.controllers.aitenant.reconciler import AITenantReconciler, config_not_ready_message
from aitenant.controllers.aitenant.revocation import KeyRevoker, Revocations
from aitenant.controllers.aitenant.stale_keys import StaleKeys
from aitenant.controllers.status import StatusWriter
from aitenant.resources import AITenantView
from aitenant.runtime.cache.reads import CachedReads
from aitenant.runtime.client.events import EventRecorder
from aitenant.runtime.control.controller import Done, Key, RequeueAfter, Result, Retry
from aitenant.settings import Settings

from ...scripted_api import ScriptedApi, echo, ok, status

NS = "ai-tenants"
GATEWAY_NS = "gateways"
TENANTS = f"/apis/maas.opendatahub.io/v1alpha1/namespaces/{NS}/aitenants"
EVENTS = f"/api/v1/namespaces/{NS}/events"
SETTINGS = Settings(
    aitenant_namespace=NS, gateway_namespace=GATEWAY_NS, controller_namespace="aitenant-system"
)


def tenant(name: str, namespace: str = NS, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": contract.API_VERSION,
        "kind": "AITenant",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": "7",
            "finalizers": [contract.AITENANT_FINALIZER],
            **meta,
        },
        "spec": {"gateway": {"name": name}},
    }


class StandInRevoker(KeyRevoker):
    """maas-api's revocation endpoint: counts the calls, each revokes ``stale`` keys."""

    def __init__(self) -> None:
        super().__init__(ca_file=None)
        self.calls: list[str] = []
        self.stale = 0

    async def revoke(self, url: str, *, attempts: int | None = None) -> int:
        self.calls.append(url)
        return self.stale


class Harness:
    """One reconciler over a scripted API; the informer is a dict of tenants."""

    def __init__(self, *tenants: dict[str, Any]) -> None:
        self.api = ScriptedApi()
        self.tenants = {(t["metadata"]["namespace"], t["metadata"]["name"]): t for t in tenants}
        self.finalized: list[str] = []
        self.maas_api = StandInRevoker()
        client = self.api.client()

        async def finalize(view: AITenantView, status: StatusWriter) -> Result:
            self.finalized.append(view.name)
            return Done()

        self.reconciler = AITenantReconciler(
            client=client,
            settings=SETTINGS,
            events=EventRecorder(client, component="unit-tests"),
            get_tenant=lambda namespace, name: self.tenants.get((namespace, name)),
            remember=lambda obj: None,
            reads=CachedReads(client),
            finalize=finalize,
            stale_keys=StaleKeys(revocations=Revocations(self.maas_api), settings=SETTINGS),
        )

    async def reconcile(self, namespace: str, name: str) -> Result:
        return await self.reconciler.reconcile(Key(namespace, name))

    def statuses(self, path: str) -> list[dict[str, Any]]:
        return [body["status"] for body in self.api.bodies("UPDATE", f"{path}/status")]


def ready(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Ready")


async def test_a_misplaced_tenant_fails_once_without_requeue() -> None:
    h = Harness(tenant("lost", namespace="default", finalizers=None))
    path = "/apis/maas.opendatahub.io/v1alpha1/namespaces/default/aitenants/lost"
    h.api.on("PATCH", path, ok(tenant("lost", namespace="default", resourceVersion="8")))
    h.api.on("UPDATE", f"{path}/status", echo(200))
    h.api.on("CREATE", "/api/v1/namespaces/default/events", echo())

    assert await h.reconcile("default", "lost") == Done()

    assert h.api.writes == [
        ("PATCH", path),  # the finalizer comes first, as upstream
        ("UPDATE", f"{path}/status"),
        ("CREATE", "/api/v1/namespaces/default/events"),
    ]
    assert h.api.bodies("PATCH", path)[0]["metadata"] == {
        "finalizers": [contract.AITENANT_FINALIZER],
        "resourceVersion": "7",
    }
    (written,) = h.statuses(path)
    assert written["phase"] == "Failed"
    assert ready(written)["reason"] == "InvalidPlacement"
    assert "tenantNamespace" not in written
    (event,) = h.api.bodies("CREATE", "/api/v1/namespaces/default/events")
    assert (event["type"], event["reason"]) == ("Warning", "InvalidPlacement")


async def test_a_missing_gateway_is_reported_and_looked_at_again_in_30s() -> None:
    h = Harness(tenant("red"))
    h.api.on("UPDATE", f"{TENANTS}/red/status", echo(200))
    h.api.on("CREATE", EVENTS, echo())

    assert await h.reconcile(NS, "red") == RequeueAfter(30)

    first, second = h.statuses(f"{TENANTS}/red")
    # status.gatewayRef is written before any child exists, then the failure.
    assert first["gatewayRef"] == {"name": "red", "namespace": GATEWAY_NS}
    assert first["tenantNamespace"] == "ai-tenant-red"
    assert ready(second)["reason"] == "GatewayCheckFailed"
    assert ready(second)["message"].startswith(f"gateway {GATEWAY_NS}/red not found")


async def test_a_transient_answer_is_retried_with_backoff_a_lasting_one_after_30s() -> None:
    gateway = f"/apis/gateway.networking.k8s.io/v1/namespaces/{GATEWAY_NS}/gateways/red"
    for code, expected in ((503, Retry), (403, RequeueAfter)):
        h = Harness(tenant("red"))
        h.api.on("UPDATE", f"{TENANTS}/red/status", echo(200))
        h.api.on("CREATE", EVENTS, echo())
        h.api.on("GET", gateway, status(code, message=f"gateway says {code}"))

        result = await h.reconcile(NS, "red")

        assert isinstance(result, expected), code
        written = h.statuses(f"{TENANTS}/red")[-1]
        assert ready(written)["reason"] == "GatewayCheckFailed"
        assert ready(written)["message"] == f"get Gateway {GATEWAY_NS}/red: gateway says {code}"


async def test_an_unchanged_failure_writes_nothing_the_second_time() -> None:
    h = Harness(tenant("red"))
    h.api.on("UPDATE", f"{TENANTS}/red/status", echo(200, rv="8"))
    h.api.on("CREATE", EVENTS, echo())
    await h.reconcile(NS, "red")
    # The informer now holds what was written.
    h.tenants[(NS, "red")] = {**tenant("red"), "status": h.statuses(f"{TENANTS}/red")[-1]}
    writes = len(h.api.writes)

    assert await h.reconcile(NS, "red") == RequeueAfter(30)
    assert len(h.api.writes) == writes


async def test_deletion_goes_to_the_finalizer_only_while_ours_is_on() -> None:
    stamp = {"deletionTimestamp": "2026-01-01T00:00:00Z"}
    h = Harness(tenant("gone", **stamp), tenant("foreign", finalizers=["x/y"], **stamp))

    assert await h.reconcile(NS, "gone") == Done()
    assert await h.reconcile(NS, "foreign") == Done()
    assert await h.reconcile(NS, "absent") == Done()

    assert h.finalized == ["gone"]
    assert h.api.sent == []


async def test_a_tenant_moved_to_another_gateway_releases_the_old_ones_labels() -> None:
    # status.gatewayRef still names the Gateway the tenant used before its spec moved it.
    moved = {**tenant("red"), "status": {"gatewayRef": {"namespace": GATEWAY_NS, "name": "old"}}}
    h = Harness(moved)
    infra = "/api/v1/namespaces/aitenant-system"
    claim = f"/api/v1/namespaces/{NS}/configmaps/{naming.claim_name(GATEWAY_NS, 'old')}"
    h.api.on(
        "GET",
        infra,
        ok(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": "aitenant-system",
                    "resourceVersion": "3",
                    "labels": {"team": "old", "kept": "yes"},
                    "annotations": {LEDGER: json.dumps({"team": ["old"]})},
                },
            }
        ),
    )
    h.api.on("GET", claim, status(404))  # nobody else holds the old Gateway
    h.api.on("PATCH", infra, echo(200))
    h.api.on("UPDATE", f"{TENANTS}/red/status", echo(200))
    h.api.on("CREATE", EVENTS, echo())

    await h.reconcile(NS, "red")

    assert h.api.writes[0] == ("PATCH", infra), "released before gatewayRef moves on"
    (patch,) = h.api.bodies("PATCH", infra)
    assert patch["metadata"]["labels"] == {"team": None}
    assert patch["metadata"]["annotations"] == {LEDGER: None}
    assert h.statuses(f"{TENANTS}/red")[0]["gatewayRef"] == {"name": "red", "namespace": GATEWAY_NS}


async def test_the_old_gateways_labels_stay_when_another_tenant_holds_it() -> None:
    moved = {**tenant("red"), "status": {"gatewayRef": {"namespace": GATEWAY_NS, "name": "old"}}}
    h = Harness(moved)
    claim_name = naming.claim_name(GATEWAY_NS, "old")
    h.api.on(
        "GET",
        f"/api/v1/namespaces/{NS}/configmaps/{claim_name}",
        ok(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": claim_name,
                    "namespace": NS,
                    "ownerReferences": [
                        {
                            "apiVersion": contract.API_VERSION,
                            "kind": "AITenant",
                            "name": "blue",
                            "uid": "uid-blue",
                            "controller": True,
                        }
                    ],
                },
            }
        ),
    )
    h.api.on("UPDATE", f"{TENANTS}/red/status", echo(200))
    h.api.on("CREATE", EVENTS, echo())

    await h.reconcile(NS, "red")

    assert not [w for w in h.api.writes if w[0] == "PATCH"]


def test_a_config_not_ready_is_reported_with_its_own_reason_and_message() -> None:
    waiting = contract.Message.CONFIG_NOT_READY
    assert config_not_ready_message(None) == waiting
    assert config_not_ready_message({"status": {}}) == waiting
    not_ready = {
        "type": "Ready",
        "status": "False",
        "reason": "MaaSAPINotAvailable",
        "message": "waiting for Deployment a/maas-api-t to become available: pod p: why",
    }
    assert config_not_ready_message({"status": {"conditions": [not_ready]}}) == (
        f"{waiting}: MaaSAPINotAvailable: "
        "waiting for Deployment a/maas-api-t to become available: pod p: why"
    )
    # A Ready config is not "not ready": no reason of its to repeat.
    ready_cond = {**not_ready, "status": "True", "reason": "Reconciled"}
    assert config_not_ready_message({"status": {"conditions": [ready_cond]}}) == waiting
