"""DELETE with preconditions, checked at the transport (what goes on the wire, errors mapped)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from lightkube import ApiError, AsyncClient, KubeConfig

from aitenant.resources import Config, LegacyTenant
from aitenant.runtime.client.requests import delete_with_preconditions

CONFIG = KubeConfig.from_dict(
    {
        "clusters": [{"name": "c", "cluster": {"server": "https://api.test"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
)


class Recorder:
    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        self.requests: list[tuple[str, str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))
        return self.response


async def test_sends_uid_and_resource_version_preconditions() -> None:
    api = Recorder(httpx2.Response(200, json={"kind": "Status", "status": "Success"}))
    client = AsyncClient(CONFIG, transport=httpx2.MockTransport(api))
    await delete_with_preconditions(
        client, LegacyTenant, "default-tenant", namespace="ns", uid="u-1", resource_version="42"
    )
    assert api.requests == [
        (
            "DELETE",
            "/apis/maas.opendatahub.io/v1alpha1/namespaces/ns/tenants/default-tenant",
            {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"uid": "u-1", "resourceVersion": "42"},
            },
        )
    ]


async def test_cluster_scoped_and_without_preconditions() -> None:
    api = Recorder(httpx2.Response(200, json={"kind": "Status", "status": "Success"}))
    client = AsyncClient(CONFIG, transport=httpx2.MockTransport(api))
    await delete_with_preconditions(client, Config, "default")
    assert api.requests == [
        (
            "DELETE",
            "/apis/maas.opendatahub.io/v1alpha1/configs/default",
            {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {}},
        )
    ]


async def test_a_failed_precondition_is_an_api_error() -> None:
    conflict = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Conflict",
        "code": 409,
        "message": "Precondition failed: UID in precondition: u-1, UID in object meta: u-2",
    }
    client = AsyncClient(
        CONFIG, transport=httpx2.MockTransport(Recorder(httpx2.Response(409, json=conflict)))
    )
    with pytest.raises(ApiError) as info:
        await delete_with_preconditions(client, LegacyTenant, "t", namespace="ns", uid="u-1")
    assert info.value.status.code == 409
