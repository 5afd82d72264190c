"""The singleton names of MaasTenantConfig, Tenant and Config (the reference CRDs' CEL rules),
judged by ``review_singleton`` and served at their own paths."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from webhook_fakes import POLICY, FakeIndex, review_body

from aitenant import contract
from aitenant.webhook.server import admission_app
from aitenant.webhook.validators import (
    DEFAULT_MAX_BYTES,
    review_singleton,
    validate_singleton_create,
)

KINDS = {kind.kind: kind for kind in contract.SINGLETON_KINDS}


def obj(kind: str, name: str, namespace: str | None = "ai-tenant-a") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None and kind != "Config":
        metadata["namespace"] = namespace
    return {"apiVersion": contract.API_VERSION, "kind": kind, "metadata": metadata}


def request_for(
    kind: str, operation: str, body: dict[str, Any] | None, *, resource: str | None = None
) -> dict[str, Any]:
    singleton = KINDS[kind]
    meta = (body or {}).get("metadata", {})
    request: dict[str, Any] = {
        "uid": "req-9",
        "kind": {"group": contract.GROUP, "version": contract.VERSION, "kind": kind},
        "resource": {
            "group": contract.GROUP,
            "version": contract.VERSION,
            "resource": resource or singleton.resource,
        },
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "operation": operation,
    }
    if body is not None:
        request["object"] = body
    return request


def answer(kind: str, request: dict[str, Any]) -> dict[str, Any]:
    status, document = review_singleton(
        review_body(request), singleton=KINDS[kind], max_bytes=DEFAULT_MAX_BYTES
    )
    assert status == 200
    return document["response"]


@pytest.mark.parametrize(
    ("kind", "good", "message"),
    [
        ("MaasTenantConfig", "default-tenant", "MaasTenantConfig name must be default-tenant"),
        ("Tenant", "default-tenant", "Tenant name must be default-tenant"),
        ("Config", "default", "Config name must be default"),
    ],
)
def test_only_the_one_name_is_created_with_the_cel_rules_message(
    kind: str, good: str, message: str
) -> None:
    assert answer(kind, request_for(kind, "CREATE", obj(kind, good))) == {
        "uid": "req-9",
        "allowed": True,
    }
    denied = answer(kind, request_for(kind, "CREATE", obj(kind, "extra")))
    assert denied["allowed"] is False
    assert denied["status"] == {"code": 403, "reason": "Forbidden", "message": message}


@pytest.mark.parametrize("operation", ["UPDATE", "DELETE"])
def test_stored_objects_stay_editable_and_deletable(operation: str) -> None:
    # An "extra" config stored before the rule existed must lose its finalizers and go.
    response = answer("MaasTenantConfig", request_for("MaasTenantConfig", operation, None))
    assert response["allowed"] is True


def test_name_comes_from_the_request_when_the_object_lacks_it() -> None:
    body = obj("Config", "")
    body["metadata"] = {}
    request = request_for("Config", "CREATE", body)
    request["name"] = "default"
    assert answer("Config", request)["allowed"] is True


def test_another_kind_on_this_path_is_a_bad_request() -> None:
    request = request_for("Config", "CREATE", obj("Config", "default"), resource="aitenants")
    response = answer("Config", request)
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert (
        "only validates maas.opendatahub.io/v1alpha1 Config (configs)"
        in (response["status"]["message"])
    )


def test_object_of_the_wrong_kind_is_denied() -> None:
    verdict = validate_singleton_create(obj("Tenant", "default-tenant"), KINDS["Config"])
    assert not verdict.allowed
    assert (
        verdict.message == "expected Config object, got maas.opendatahub.io/v1alpha1, Kind=Tenant"
    )


def test_malformed_body_is_http_400() -> None:
    status, document = review_singleton(
        b"not json", singleton=KINDS["Config"], max_bytes=DEFAULT_MAX_BYTES
    )
    assert (status, document) == (400, {"error": "request body is not valid JSON"})


@pytest.fixture
async def client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    app = admission_app(policy=POLICY, index=FakeIndex())
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_each_kind_is_served_at_its_path(
    client: TestClient[web.Request, web.Application], kind: str
) -> None:
    body = review_body(request_for(kind, "CREATE", obj(kind, "wrong-name")))
    response = await client.post(KINDS[kind].path, data=body)
    assert response.status == 200
    document = await response.json()
    assert document["response"]["status"]["message"] == KINDS[kind].message
    # The AITenant path does not judge these kinds.
    response = await client.post(contract.WEBHOOK_PATH, data=body)
    assert (await response.json())["response"]["status"]["code"] == 400
