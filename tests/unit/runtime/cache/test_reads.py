"""Reads served from a synced informer on a hit; on a miss, from the API unless the informer
sees every object the read could find."""

from __future__ import annotations

from typing import Any

import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.resources.rbac_authorization_v1 import Role

from aitenant.runtime.cache.informer import Informer
from aitenant.runtime.cache.reads import CachedReads

CONFIG = KubeConfig.from_dict(
    {
        "clusters": [{"name": "c", "cluster": {"server": "https://api.test"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
)


def role(name: str, namespace: str, verb: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "5"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": [verb]}],
    }


class Api:
    """The API server's answers to GETs: one Role exists, everything else is 404."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.paths.append(request.url.path)
        if request.url.path.endswith("/namespaces/t/roles/live"):
            return httpx2.Response(200, json=role("live", "t", "list"))
        if request.url.path.endswith("/namespaces/t/roles"):
            return httpx2.Response(200, json={"kind": "RoleList", "metadata": {}, "items": []})
        return httpx2.Response(
            404, json={"kind": "Status", "code": 404, "reason": "NotFound", "message": "nope"}
        )


def setup(
    *,
    synced: bool,
    namespace: str = "*",
    labels: dict[str, str] | None = None,
    fields: dict[str, str] | None = None,
    trust_misses: bool = False,
) -> tuple[CachedReads, Api]:
    api = Api()
    client = AsyncClient(CONFIG, transport=httpx2.MockTransport(api))
    informer = Informer(client, Role, namespace=namespace, labels=labels, fields=fields)
    informer._apply("ADDED", role("cached", "t", "get"))
    if synced:
        informer.synced.set()
    reads = CachedReads(client)
    reads.serve(informer, trust_misses=trust_misses)
    return reads, api


async def test_a_hit_is_served_typed_without_asking_the_api() -> None:
    reads, api = setup(synced=True)
    hit = await reads.get(Role, "cached", "t")
    assert isinstance(hit, Role)
    assert hit.rules is not None
    assert hit.rules[0].verbs == ["get"]
    assert api.paths == []


async def test_a_miss_in_a_label_selected_informer_asks_the_api_and_not_found_is_none() -> None:
    reads, api = setup(synced=True, labels={"team": "red"})
    live = await reads.get(Role, "live", "t")
    assert isinstance(live, Role)
    assert await reads.get(Role, "absent", "t") is None
    assert len(api.paths) == 2, "both went to the API"


async def test_a_miss_in_an_informer_that_sees_everything_is_an_answer() -> None:
    reads, api = setup(synced=True)  # no selector: "live" is not cached, so it is not there
    assert await reads.get(Role, "live", "t") is None
    reads2, api2 = setup(synced=True, labels={"team": "red"}, trust_misses=True)
    assert await reads2.get(Role, "live", "t") is None
    assert api.paths == api2.paths == []


async def test_a_miss_while_the_watch_is_down_asks_the_api() -> None:
    """Events are being missed while the informer waits to reconnect (a CRD's storage being
    rebuilt answers 429 for a while): "not there" may be wrong, so the API answers."""
    reads, api = setup(synced=True, labels={"team": "red"}, trust_misses=True)
    informer = reads.informer(Role, "t")
    assert informer is not None
    informer.interrupted = True
    assert isinstance(await reads.get(Role, "live", "t"), Role)  # not cached, but it exists
    assert api.paths == ["/apis/rbac.authorization.k8s.io/v1/namespaces/t/roles/live"]
    assert isinstance(await reads.get(Role, "cached", "t"), Role)  # a hit is still served
    assert len(api.paths) == 1


async def test_a_field_selected_informer_answers_misses_only_for_its_name() -> None:
    reads, api = setup(synced=True, fields={"metadata.name": "live"})
    assert await reads.get(Role, "live", "t") is None  # selected by name, and not cached
    assert api.paths == []
    assert isinstance(await reads.get(Role, "cached", "t"), Role)  # hit
    assert await reads.get(Role, "other", "t") is None  # not selected: asks the API (404)
    assert api.paths == ["/apis/rbac.authorization.k8s.io/v1/namespaces/t/roles/other"]


async def test_an_unsynced_or_other_namespace_informer_is_not_trusted() -> None:
    reads, api = setup(synced=False)
    assert await reads.get(Role, "cached", "t") is None  # the API says 404
    assert len(api.paths) == 1
    reads, _ = setup(synced=True, namespace="elsewhere")
    assert await reads.get(Role, "cached", "t") is None
    assert reads.informer(Role, "elsewhere") is not None
    assert reads.informer(Role, "t") is None


async def test_a_list_is_served_only_by_an_informer_with_the_same_scope() -> None:
    reads, api = setup(synced=True, namespace="t", labels={"team": "red"})
    served = await reads.list(Role, namespace="t", labels={"team": "red"})
    assert [r.metadata.name for r in served if r.metadata] == ["cached"]
    assert api.paths == []
    await reads.list(Role, namespace="t", labels={"team": "blue"})  # not what the informer holds
    assert api.paths == ["/apis/rbac.authorization.k8s.io/v1/namespaces/t/roles"]


async def test_a_list_with_an_index_answers_only_the_objects_filed_under_it() -> None:
    reads, api = setup(synced=True, namespace="t", labels={"team": "red"})
    informer = reads.informer(Role, "t")
    assert informer is not None
    informer._apply("ADDED", role("other", "t", "list"))
    informer.add_index("verb", lambda o: [o["rules"][0]["verbs"][0]])
    served = await reads.list(Role, namespace="t", labels={"team": "red"}, index=("verb", "list"))
    assert [r.metadata.name for r in served if r.metadata] == ["other"]
    every = await reads.list(Role, namespace="t", labels={"team": "red"}, index=("nope", "x"))
    assert sorted(r.metadata.name for r in every if r.metadata) == ["cached", "other"]
    assert api.paths == []
