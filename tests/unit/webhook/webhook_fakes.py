"""Test doubles and builders shared by the webhook tests (imported as a plain module)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from aitenant import contract
from aitenant.gateway_index import TenantsByGateway
from aitenant.naming import gateway_ref_for
from aitenant.webhook.access import Answer, GatewayUse
from aitenant.webhook.validators import WebhookPolicy

AIT_NS = "ai-tenants"
GW_NS = "openshift-ingress"
POLICY = WebhookPolicy(aitenant_namespace=AIT_NS, gateway_namespace=GW_NS)


class FakeIndex(TenantsByGateway):
    """Dict-backed TenantsByGateway: resolves gateways of the given AITenant objects."""

    def __init__(
        self,
        tenants: Iterable[Mapping[str, Any]] = (),
        *,
        synced: bool = True,
        gateway_namespace: str = GW_NS,
        error: Exception | None = None,
    ) -> None:
        self.synced = synced
        self.error = error
        self.calls: list[tuple[str, str]] = []
        self._by_gateway: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for tenant in tenants:
            meta = tenant["metadata"]
            key = gateway_ref_for(tenant, gateway_namespace)
            self._by_gateway.setdefault(key, []).append((meta["namespace"], meta["name"]))

    def has_synced(self) -> bool:
        return self.synced

    def tenants_for_gateway(self, namespace: str, name: str) -> list[tuple[str, str]]:
        self.calls.append((namespace, name))
        if self.error is not None:
            raise self.error
        return list(self._by_gateway.get((namespace, name), []))


def tenant(
    name: str = "team-a",
    *,
    namespace: str = AIT_NS,
    gateway: str | None = None,
    spec: dict[str, Any] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    """An AITenant as the API server sends it."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        metadata["finalizers"] = [contract.AITENANT_FINALIZER]
    body: dict[str, Any] = dict(spec or {})
    if gateway is not None:
        body["gateway"] = {"name": gateway}
    obj: dict[str, Any] = {
        "apiVersion": contract.API_VERSION,
        "kind": "AITenant",
        "metadata": metadata,
    }
    if body:
        obj["spec"] = body
    return obj


def admission_request(
    operation: str,
    obj: Mapping[str, Any] | None,
    old: Mapping[str, Any] | None = None,
    *,
    uid: str = "req-1",
) -> dict[str, Any]:
    """A ``request`` of an admission.k8s.io/v1 AdmissionReview for AITenants."""
    source = obj or old or {}
    meta = source.get("metadata", {})
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": contract.GROUP, "version": contract.VERSION, "kind": "AITenant"},
        "resource": {
            "group": contract.GROUP,
            "version": contract.VERSION,
            "resource": "aitenants",
        },
        "requestKind": {"group": contract.GROUP, "version": contract.VERSION, "kind": "AITenant"},
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "operation": operation,
        "userInfo": {"username": "tester"},
        "dryRun": False,
    }
    if obj is not None:
        request["object"] = obj
    if old is not None:
        request["oldObject"] = old
    return request


def review_body(request: Mapping[str, Any] | None, **envelope: Any) -> bytes:
    """Serialise an AdmissionReview; ``envelope`` overrides apiVersion/kind."""
    document: dict[str, Any] = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    document.update(envelope)
    if request is not None:
        document["request"] = request
    return json.dumps(document).encode()


class FakeAuthorizer:
    """``GatewayAuthorizer`` answering every question alike (allowed unless told otherwise),
    recording the questions asked."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.answer = answer or Answer(True)
        self.questions: list[GatewayUse] = []

    async def may_use(self, question: GatewayUse) -> Answer:
        self.questions.append(question)
        return self.answer
