"""lightkube's private API as we use it, checked against the locked release.

When the first test fails, lightkube was upgraded in uv.lock: re-check every function of
``aitenant.runtime.client.lightkube_private`` against the new release, then update
``VERIFIED_VERSION``. The other tests exercise each function at the transport.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx2
import pytest
from lightkube import ApiError
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Namespace

from aitenant.resources import LegacyTenant
from aitenant.runtime.client import lightkube_private as private

from ...scripted_api import SERVER, ScriptedApi, listing, ok, status

LOCK = Path(__file__).parents[4] / "uv.lock"


def locked_version(package: str) -> str:
    lock = tomllib.loads(LOCK.read_text())
    return next(p["version"] for p in lock["package"] if p["name"] == package)


def test_the_locked_and_installed_lightkube_is_the_verified_one() -> None:
    assert locked_version("lightkube") == private.VERIFIED_VERSION
    assert metadata.version("lightkube") == private.VERIFIED_VERSION


async def test_http_client_is_the_one_requests_go_through() -> None:
    api = ScriptedApi().on("GET", "/api/v1", ok({"resources": []}))
    client = api.client()
    http = private.http_client(client)
    assert isinstance(http, httpx2.AsyncClient)
    assert str(http.base_url).rstrip("/") == SERVER
    response = await http.get("/api/v1")
    assert response.json() == {"resources": []}
    assert response.request.headers["authorization"] == "Bearer t"
    assert api.requests() == [("GET", "/api/v1")]


def test_resource_kind() -> None:
    assert private.resource_kind(Namespace) == "Namespace"
    assert private.resource_kind(LegacyTenant) == "Tenant"


async def test_resource_class_talks_to_its_paths_and_status_subresource() -> None:
    cls: Any = private.resource_class("example.com", "v1", "Widget", "widgets", namespaced=True)
    path = "/apis/example.com/v1/namespaces/ns/widgets/w"
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    api = ScriptedApi().on("GET", path, ok(body)).on("UPDATE", f"{path}/status", ok(body))
    client = api.client()
    got = await client.get(cls, "w", namespace="ns")
    assert dict(got)["kind"] == "Widget"
    await client.replace(cls.Status.from_dict({**body, "status": {}}), "w", namespace="ns")
    assert api.requests() == [("GET", path), ("UPDATE", f"{path}/status")]
    cluster: Any = private.resource_class(
        "example.com", "v1", "Gadget", "gadgets", namespaced=False
    )
    api.on("GET", "/apis/example.com/v1/gadgets/g", ok({"metadata": {"name": "g"}}))
    await client.get(cluster, "g")
    assert api.requests()[-1] == ("GET", "/apis/example.com/v1/gadgets/g")


async def test_dict_resource_lists_a_typed_kind_as_dicts_from_the_same_paths() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": {"replicas": 2, "selector": {}, "template": {}},
    }
    api = ScriptedApi()
    api.on("GET", "/apis/apps/v1/namespaces/ns/deployments", listing([deployment], "5"))
    api.on("GET", "/api/v1/namespaces", listing([{"metadata": {"name": "n"}}], "6"))
    client = api.client()
    twin: Any = private.dict_resource(Deployment)
    assert private.resource_kind(twin) == "Deployment"
    listed = [o async for o in client.list(twin, namespace="ns")]
    assert [type(o).__mro__[-2] for o in listed] == [dict], "a dict, no typed model"
    assert dict(listed[0]) == deployment
    namespaces: Any = private.dict_resource(Namespace)
    assert [dict(o) async for o in client.list(namespaces)] == [{"metadata": {"name": "n"}}]
    assert private.dict_resource(LegacyTenant) is LegacyTenant, "generic already"


async def test_delete_with_body_sends_it_and_maps_errors_to_api_error() -> None:
    path = "/apis/maas.opendatahub.io/v1alpha1/namespaces/ns/tenants/t"
    api = ScriptedApi().on("DELETE", path, ok({"kind": "Status", "status": "Success"}))
    client = api.client()
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "u"}}
    await private.delete_with_body(client, LegacyTenant, "t", namespace="ns", body=body)
    assert api.bodies("DELETE", path) == [body]
    api.on("DELETE", path, status(409, "Conflict", "precondition failed"))
    with pytest.raises(ApiError) as info:
        await private.delete_with_body(client, LegacyTenant, "t", namespace="ns", body=body)
    assert info.value.status.code == 409


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def test_no_other_module_reaches_into_lightkube_privates() -> None:
    src = Path(private.__file__).parents[2]  # src/aitenant
    pattern = re.compile(r"\._client\b|\._api_info\b|\._transport\b")
    offenders = [
        str(path.relative_to(src))
        for path in src.rglob("*.py")
        if path.name != "lightkube_private.py" and pattern.search(path.read_text())
    ]
    assert offenders == []
