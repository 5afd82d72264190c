"""Informer edge cases with a scripted API at the transport (no emulator: fixed responses)."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from aitenant.resources import AITenant
from aitenant.runtime.cache.informer import LIST_PAGE, Informer, as_dict, is_newer

from ...scripted_api import CONFIG, ScriptedApi, listing, ok, status, stream


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


async def test_a_failed_watch_is_interrupted_until_it_reconnects() -> None:
    api = ScriptedApi().on("GET", PATH, listing([tenant("a", "10")], "10"))
    api.on(
        "WATCH",
        PATH,
        status(429, message="storage is (re)initializing"),
        stream({"type": "MODIFIED", "object": tenant("a", "11")}),
        DONE,
    )
    informer = Informer(api.client(), AITenant, max_backoff=0.3)
    seen_while_watching: list[bool] = []
    done = asyncio.Event()

    def handler(event: str, old: Any, new: dict[str, Any]) -> None:
        if event == "MODIFIED":
            seen_while_watching.append(informer.interrupted)
            done.set()

    informer.add_handler(handler)
    task = asyncio.create_task(informer.run())
    try:
        for _ in range(500):  # sampled during the 0.3 s backoff after the 429
            if informer.interrupted:
                break
            await asyncio.sleep(0.01)
        assert informer.interrupted, "the failed watch never showed as interrupted"
        assert informer.synced.is_set(), "still synced: hits are served, misses are not"
        await asyncio.wait_for(done.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert seen_while_watching == [False]


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


def test_a_remembered_write_is_dropped_when_the_watch_delivers_it_unread() -> None:
    informer = Informer(AsyncClient(CONFIG), AITenant)
    informer._apply("ADDED", tenant("a", "10"))
    informer.remember(tenant("a", "12"))
    informer._apply("MODIFIED", tenant("a", "13"))  # nobody read "a" in between
    assert informer._written == {}, "a thousand settled tenants hold no second copy"


def test_a_typed_model_a_write_returned_is_remembered() -> None:
    # lightkube answers a write of a built-in kind (a Namespace's merge patch) with its typed
    # model, not a dict: reading its metadata as a dict's failed every such pass.
    informer = Informer(AsyncClient(CONFIG), Namespace, namespace=None)
    informer._apply("ADDED", {"metadata": {"name": "infra", "resourceVersion": "10"}})
    patched = Namespace(
        metadata=ObjectMeta(name="infra", resourceVersion="12", labels={"example.com/gw": "yes"})
    )
    informer.remember(patched)
    served = informer.get("", "infra") or {}
    assert served["metadata"]["labels"] == {"example.com/gw": "yes"}
    assert served["metadata"]["resourceVersion"] == "12"


def test_a_handler_tells_our_own_writes_from_someone_elses() -> None:
    informer = Informer(AsyncClient(CONFIG), AITenant)
    seen: list[tuple[str, bool]] = []
    informer.add_handler(
        lambda event, old, new: seen.append(
            (new["metadata"]["resourceVersion"], informer.ours(new))
        )
    )
    informer._apply("ADDED", tenant("a", "10"))
    informer.remember(tenant("a", "11"))
    informer.remember(tenant("a", "12"))  # two writes in one pass
    for rv in ("11", "12", "13"):  # ours, ours, then someone else's
        informer._apply("MODIFIED", tenant("a", rv))
    assert seen == [("10", False), ("11", True), ("12", True), ("13", False)]
    assert informer._own_versions == {}, "forgotten once delivered"


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


def test_the_answer_to_removing_the_last_finalizer_is_served_until_the_deletion_arrives() -> None:
    # The API server answers that write with the object at the version it deletes, which the
    # informer already holds (with the finalizer): the answer is still the newer news.
    informer = Informer(AsyncClient(CONFIG), AITenant)
    deleting = tenant("a", "10")
    deleting["metadata"] |= {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["f"]}
    informer._apply("ADDED", deleting)
    answer = json.loads(json.dumps(deleting))
    answer["metadata"]["finalizers"] = None
    informer.remember(answer)
    informer._apply("MODIFIED", deleting)  # a late event of the same version changes nothing
    assert not (informer.get("ai-tenants", "a") or {})["metadata"].get("finalizers")
    informer._apply("DELETED", deleting)
    assert informer.get("ai-tenants", "a") is None
    assert informer._written == {}
    # A copy of the same version that still has finalizers is no news.
    informer._apply("ADDED", deleting)
    informer.remember(json.loads(json.dumps(deleting)))
    assert informer._written == {}


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


async def test_a_transform_and_a_field_selector_shape_what_is_kept() -> None:
    api = ScriptedApi().on("GET", PATH, listing([tenant("a", "5")], "5")).on("WATCH", PATH, DONE)
    informer = Informer(
        api.client(),
        AITenant,
        fields={"metadata.name": "a"},
        transform=lambda obj: {"metadata": obj["metadata"]},
    )
    done = asyncio.Event()
    informer.add_handler(lambda *_: done.set())
    await run_until(informer, done)
    assert informer.get("ai-tenants", "a") == {"metadata": tenant("a", "5")["metadata"]}
    assert api.sent[0].params.get("fieldSelector") == "metadata.name=a"


async def test_a_list_is_read_in_pages_of_one_snapshot() -> None:
    first = ok(
        {
            "kind": "List",
            "metadata": {"resourceVersion": "30", "continue": "page-2"},
            "items": [tenant("a", "10"), tenant("b", "20")],
        }
    )
    api = ScriptedApi().on("GET", PATH, first, listing([tenant("c", "30")], "30"))
    api.on("WATCH", PATH, DONE)
    informer = Informer(api.client(), AITenant)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert sorted(o["metadata"]["name"] for o in informer.list()) == ["a", "b", "c"]
    lists = [s.params for s in api.sent if s.verb == "GET"]
    assert [p.get("limit") for p in lists] == [str(LIST_PAGE)] * 2
    assert [p.get("continue") for p in lists] == [None, "page-2"]
    assert watch_versions(api)[0] == "30"


NOT_SERVED = status(404, "NotFound", "no kind")


async def test_an_optional_kind_that_is_not_served_is_synced_and_empty() -> None:
    api = ScriptedApi().on("GET", PATH, NOT_SERVED, listing([tenant("a", "7")], "7"))
    api.on("WATCH", PATH, DONE)
    informer = Informer(api.client(), AITenant, optional=True, max_backoff=0.01)
    informer._apply("ADDED", tenant("stale", "3"))  # gone when the kind is not served
    done = asyncio.Event()
    events: list[str] = []

    def handler(event: Any, old: Any, new: dict[str, Any]) -> None:
        events.append(f"{event} {new['metadata']['name']}")
        if event == "ADDED":
            done.set()

    informer.add_handler(handler)
    await run_until(informer, done)  # the kind appears on the next list
    assert events == ["DELETED stale", "ADDED a"]
    assert informer.synced.is_set()


async def test_a_required_kind_that_is_not_served_is_never_synced() -> None:
    api = ScriptedApi().on("GET", PATH, NOT_SERVED)
    informer = Informer(api.client(), AITenant, max_backoff=0.01)
    task = asyncio.create_task(informer.run())
    try:
        for _ in range(500):  # until three lists were refused
            if len(api.requests("GET")) >= 3:
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert len(api.requests("GET")) >= 3, "the informer keeps listing"
    assert not informer.synced.is_set()


def test_every_read_hands_out_a_fresh_copy() -> None:
    informer = Informer(AsyncClient(CONFIG), AITenant)
    informer._apply("ADDED", tenant("a", "5"))
    informer.add_index("gateway", lambda o: [o["spec"]["gateway"]["name"]])
    copy = informer.get("ai-tenants", "a")
    assert copy == tenant("a", "5")
    assert copy is not None
    copy["spec"]["gateway"]["name"] = "changed"
    assert informer.get("ai-tenants", "a") == tenant("a", "5")
    assert informer.by_index("gateway", "gw-a") == [tenant("a", "5")]
    assert informer.list() == [tenant("a", "5")]


def test_an_index_read_from_another_thread_never_sees_half_an_update() -> None:
    """The webhook's thread reads the gateway index while the watch updates the same tenant:
    the old entry is removed and the new one added as one step (a switch between the two
    would let a Gateway look free)."""
    informer = Informer(AsyncClient(CONFIG), AITenant)
    informer.add_index("gateway", lambda o: [o["spec"]["gateway"]["name"]])
    informer._apply("ADDED", tenant("a", "1"))
    stop = threading.Event()
    seen: list[int] = []

    def read() -> None:
        while not stop.is_set():
            seen.append(len(informer.by_index("gateway", "gw-a")))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    reader = threading.Thread(target=read)
    reader.start()
    try:
        for rv in range(2, 5000):
            informer._apply("MODIFIED", tenant("a", str(rv)))
    finally:
        stop.set()
        reader.join()
        sys.setswitchinterval(interval)
    assert len(seen) > 100, "the reader ran alongside the updates"
    assert set(seen) == {1}
