"""Informer edge cases with a scripted API at the transport (no emulator: fixed responses)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from lightkube import AsyncClient

from aitenant.resources import AITenant
from aitenant.runtime.informer import Informer, as_dict, is_newer

from ..scripted_api import CONFIG, ScriptedApi, listing, status, stream


def tenant(name: str, rv: str, generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "maas.opendatahub.io/v1alpha1",
        "kind": "AITenant",
        "metadata": {
            "name": name,
            "namespace": "ai-tenants",
            "resourceVersion": rv,
            "generation": generation,
        },
        "spec": {"gateway": {"name": f"gw-{name}"}},
    }


PATH = "/apis/maas.opendatahub.io/v1alpha1/aitenants"
DONE = status(500, message="done")  # every later watch fails: the informer keeps retrying


def watch_versions(api: ScriptedApi) -> list[str | None]:
    return [s.params.get("resourceVersion") for s in api.sent if s.verb == "WATCH"]


async def run_until(informer: Informer, done: asyncio.Event) -> None:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(done.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_relists_on_410_and_emits_the_difference() -> None:
    api = ScriptedApi()
    api.on(
        "GET",
        PATH,
        listing([tenant("a", "10"), tenant("b", "11")], "11"),
        listing([tenant("a", "20", generation=2), tenant("c", "21")], "21"),
    )
    gone = {"kind": "Status", "code": 410, "message": "too old", "reason": "Gone"}
    api.on(
        "WATCH",
        PATH,
        stream(
            {"type": "MODIFIED", "object": tenant("a", "12")}, {"type": "ERROR", "object": gone}
        ),
        DONE,
    )
    client = api.client()
    informer = Informer(client, AITenant)
    informer.add_index("gw", lambda o: [o["spec"]["gateway"]["name"]])
    seen: list[tuple[str, str]] = []
    done = asyncio.Event()

    def handler(event: str, old: Any, new: dict[str, Any]) -> None:
        seen.append((event, new["metadata"]["name"]))
        if (event, new["metadata"]["name"]) == ("DELETED", "b"):
            done.set()

    informer.add_handler(handler)
    await run_until(informer, done)

    assert seen == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("MODIFIED", "a"),
        ("MODIFIED", "a"),  # relist: a changed again
        ("ADDED", "c"),
        ("DELETED", "b"),  # relist: b vanished while the watch was gone
    ]
    assert watch_versions(api)[0] == "11", "the watch resumes from the list's resourceVersion"
    assert informer.relists == 1
    assert sorted(o["metadata"]["name"] for o in informer.list()) == ["a", "c"]
    assert [o["metadata"]["name"] for o in informer.by_index("gw", "gw-c")] == ["c"]
    assert informer.by_index("gw", "gw-b") == []
    assert informer.synced.is_set()


async def test_reconnects_after_an_error_from_the_last_version() -> None:
    api = ScriptedApi().on("GET", PATH, listing([tenant("a", "10")], "10"))
    api.on(
        "WATCH",
        PATH,
        stream({"type": "MODIFIED", "object": tenant("a", "15")}),
        status(500, message="boom"),
        stream({"type": "DELETED", "object": tenant("a", "16")}),
        DONE,
    )
    client = api.client()
    informer = Informer(client, AITenant, max_backoff=0.01)
    informer.max_backoff = 0.01
    done = asyncio.Event()
    informer.add_handler(lambda e, o, n: done.set() if e == "DELETED" else None)
    await run_until(informer, done)
    assert informer.list() == []
    # After the first stream ended the watch resumed from 15, not from the list's 10.
    assert watch_versions(api)[:2] == ["10", "15"]
    assert "15" in watch_versions(api)[2:]


def version(informer: Informer, name: str) -> str | None:
    served = informer.get("ai-tenants", name)
    return served["metadata"]["resourceVersion"] if served is not None else None


def test_a_remembered_write_is_served_until_the_watch_catches_up() -> None:
    informer = Informer(AsyncClient(CONFIG), AITenant)
    informer._apply("ADDED", tenant("a", "10"))
    informer.remember({**tenant("a", "12"), "status": {"phase": "Failed"}})
    assert (informer.get("ai-tenants", "a") or {}).get("status") == {"phase": "Failed"}
    informer._apply("MODIFIED", tenant("a", "11"))  # an older write still in flight
    assert version(informer, "a") == "12"
    informer._apply("MODIFIED", tenant("a", "12"))
    assert "status" not in (informer.get("ai-tenants", "a") or {}), "the watch's copy now"
    assert informer._written == {}


def test_remember_ignores_older_unknown_or_incomparable_copies() -> None:
    informer = Informer(AsyncClient(CONFIG), AITenant)
    informer.remember(tenant("ghost", "5"))  # not in the cache: its ADDED event will come
    informer._apply("ADDED", tenant("a", "10"))
    informer.remember(tenant("a", "9"))
    informer.remember(tenant("a", "opaque-7"))
    assert informer.get("ai-tenants", "ghost") is None
    assert version(informer, "a") == "10"


def test_a_deleted_object_forgets_the_remembered_write() -> None:
    informer = Informer(AsyncClient(CONFIG), AITenant)
    informer._apply("ADDED", tenant("a", "10"))
    informer.remember(tenant("a", "11"))
    informer._apply("DELETED", tenant("a", "11"))
    assert informer.get("ai-tenants", "a") is None


def test_resource_versions_compare_as_integers() -> None:
    assert is_newer(tenant("a", "100"), tenant("a", "99"))
    assert not is_newer(tenant("a", "99"), tenant("a", "100"))
    assert not is_newer(tenant("a", "7"), tenant("a", "7"))
    assert not is_newer(tenant("a", "010"), tenant("a", "9"))
    assert not is_newer(tenant("a", ""), tenant("a", "9"))


def test_managed_fields_are_not_kept() -> None:
    applied = {**tenant("a", "10")}
    applied["metadata"] = {**applied["metadata"], "managedFields": [{"manager": "x"}]}
    assert "managedFields" not in as_dict(applied)["metadata"]
    assert "managedFields" in applied["metadata"], "the caller's copy is left alone"
    informer = Informer(AsyncClient(CONFIG), AITenant)
    informer._apply("ADDED", tenant("a", "9"))
    informer.remember(applied)
    assert "managedFields" not in (informer.get("ai-tenants", "a") or {"metadata": {}})["metadata"]


def test_cached_copies_share_their_keys_and_short_strings() -> None:
    first = as_dict(json.loads(json.dumps(tenant("a", "10"))))
    second = as_dict(json.loads(json.dumps(tenant("b", "11"))))
    assert first == tenant("a", "10"), "the same content"
    assert first["metadata"]["namespace"] is second["metadata"]["namespace"]
    key_a = next(k for k in first["metadata"] if k == "resourceVersion")
    key_b = next(k for k in second["metadata"] if k == "resourceVersion")
    assert key_a is key_b
