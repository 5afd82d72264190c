"""When an apply is needed at all: ``covers`` decides whether the live copy already matches."""

from __future__ import annotations

import copy
from typing import Any

from aitenant.platform.apply import covers, is_unmanaged, managers_of

DESIRED: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "maas-api-a", "labels": {"app.kubernetes.io/name": "maas-api"}},
    "spec": {
        "replicas": 1,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "maas-api",
                        "image": "maas-api:v1",
                        "env": [
                            {"name": "SECURE", "value": "true"},
                            {
                                "name": "NAMESPACE",
                                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                            },
                        ],
                        "securityContext": {"capabilities": {"drop": ["ALL"]}},
                    }
                ]
            }
        },
    },
}


def live_copy() -> dict[str, Any]:
    """DESIRED as the API server returns it: metadata and defaults added."""
    live = copy.deepcopy(DESIRED)
    live["metadata"].update({"uid": "u", "resourceVersion": "7", "generation": 2})
    live["metadata"]["labels"]["extra"] = "kept"
    container = live["spec"]["template"]["spec"]["containers"][0]
    container["terminationMessagePath"] = "/dev/termination-log"
    container["env"][1]["valueFrom"]["fieldRef"]["apiVersion"] = "v1"
    live["status"] = {"replicas": 1}
    return live


def test_server_defaults_and_extra_metadata_still_cover() -> None:
    assert covers(live_copy(), DESIRED)


def test_a_changed_value_is_drift() -> None:
    live = live_copy()
    live["spec"]["template"]["spec"]["containers"][0]["image"] = "maas-api:hacked"
    assert not covers(live, DESIRED)
    live = live_copy()
    live["spec"]["replicas"] = 5
    assert not covers(live, DESIRED)
    live = live_copy()
    del live["metadata"]["labels"]["app.kubernetes.io/name"]
    assert not covers(live, DESIRED)


def test_named_lists_match_by_name_and_tolerate_additions() -> None:
    live = live_copy()
    env = live["spec"]["template"]["spec"]["containers"][0]["env"]
    env.insert(0, {"name": "ADDED_BY_SOMEONE", "value": "x"})  # another manager's entry
    assert covers(live, DESIRED)
    env[1]["value"] = "false"
    assert not covers(live, DESIRED)


def test_other_lists_compare_element_by_element() -> None:
    live = live_copy()
    live["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["drop"] = [
        "ALL",
        "NET_RAW",
    ]
    assert not covers(live, DESIRED)
    assert covers({"a": [1, 2]}, {"a": [1, 2]})
    assert not covers({"a": [2, 1]}, {"a": [1, 2]})
    assert not covers({"a": "x"}, {"a": ["x"]})
    assert not covers({}, {"a": {}})


def test_unmanaged_annotation() -> None:
    assert is_unmanaged({"metadata": {"annotations": {"opendatahub.io/managed": "false"}}})
    assert not is_unmanaged({"metadata": {"annotations": {"opendatahub.io/managed": "true"}}})
    assert not is_unmanaged({"metadata": {}})
    assert not is_unmanaged(None)


def test_objects_another_controller_owns_are_left_alone() -> None:
    ref = {"apiVersion": "v1", "kind": "Thing", "name": "x", "uid": "u"}
    assert is_unmanaged({"metadata": {"ownerReferences": [{**ref, "controller": True}]}})
    assert not is_unmanaged({"metadata": {"ownerReferences": [ref]}})


async def test_apply_all_writes_prerequisites_first_then_the_rest_at_once() -> None:
    """Secrets and ServiceAccounts in one concurrent wave, then every other object at once;
    the report keeps manifest order."""
    import asyncio

    from aitenant.platform.apply import Applier
    from aitenant.platform.render import Manifest

    def manifest(api_version: str, kind: str, name: str) -> Manifest:
        return Manifest({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}})

    manifests = [
        manifest("apps/v1", "Deployment", "d"),
        manifest("v1", "Secret", "s"),
        manifest("v1", "Service", "svc"),
        manifest("v1", "ServiceAccount", "sa"),
    ]
    in_flight: set[str] = set()
    peak: list[set[str]] = []

    class Recording:
        """Records which objects are being written at once."""

        async def create(self, obj: Any, **_: Any) -> dict[str, Any]:
            name = obj["metadata"]["name"]
            in_flight.add(name)
            peak.append(set(in_flight))
            await asyncio.sleep(0.01)
            in_flight.discard(name)
            return {"metadata": {"name": name}}

    applier = Applier(Recording())  # type: ignore[arg-type]
    report = await applier.apply_all(manifests, lambda _: None)
    assert report.created == [str(m) for m in manifests]
    assert report.writes == 4
    assert peak == [{"s"}, {"s", "sa"}, {"d"}, {"d", "svc"}]


async def test_an_object_no_cache_answers_for_is_read_first_and_left_alone_if_it_matches() -> None:
    from aitenant.platform.apply import UNKNOWN, Applier
    from aitenant.platform.render import Manifest

    from ..scripted_api import ScriptedApi, ok

    desired, live = ours(DESIRED), ours(live_copy())
    path = "/apis/apps/v1/namespaces/infra/deployments/maas-api-a"
    api = ScriptedApi().on("GET", path, ok(live))

    report = await Applier(api.client()).apply_all([Manifest(desired)], lambda _: UNKNOWN)

    assert api.requests() == [("GET", path)]
    assert report.unchanged == 1
    assert report.writes == 0


def ours(obj: dict[str, Any], tenant: str = "a") -> dict[str, Any]:
    """``obj`` in namespace infra with the tracking labels of ``tenant``."""
    from aitenant import contract

    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = "infra"
    obj["metadata"]["labels"] = {
        **obj["metadata"].get("labels", {}),
        contract.LABEL_TENANT_NAME: tenant,
        contract.LABEL_TENANT_NAMESPACE: f"ai-tenant-{tenant}",
    }
    return obj


DEPLOYMENTS = "/apis/apps/v1/namespaces/infra/deployments"
PATH = f"{DEPLOYMENTS}/maas-api-a"


async def test_a_same_named_object_of_ours_someone_else_made_is_refused_once_then_only_read() -> (
    None
):
    """One with this tenant's labels that another controller made (the reference, before a
    takeover): the apply the API refuses (422, immutable selector) becomes ``ForeignObject``
    naming its manager and the fix, and later passes read it without writing again until it
    changes; once it is gone, it is created."""
    import pytest

    from aitenant.platform.apply import Applier, ForeignObject
    from aitenant.platform.render import Manifest

    from ..scripted_api import ScriptedApi, ok, status

    desired = ours(DESIRED)
    theirs = ours(live_copy())
    theirs["metadata"]["labels"]["app.kubernetes.io/name"] = "theirs"
    theirs["metadata"]["managedFields"] = [{"manager": "maas-controller", "operation": "Apply"}]
    refused = status(422, "Invalid", "spec.selector: field is immutable")
    exists = status(409, "AlreadyExists", "already exists")
    api = ScriptedApi().on("CREATE", DEPLOYMENTS, exists).on("PATCH", PATH, refused)
    api.on("GET", PATH, ok(theirs))
    applier = Applier(api.client())

    for _ in range(3):
        with pytest.raises(ForeignObject) as raised:
            await applier.apply_all([Manifest(desired)], lambda _: None)
        message = str(raised.value)
        assert "made by maas-controller" in message
        assert "field is immutable" in message
        assert "delete it" in message
        assert not raised.value.transient
    verbs = [s.verb for s in api.sent]
    assert verbs == ["CREATE", "GET", "PATCH", "GET", "GET"], "one refused write"
    assert api.sent[2].body["metadata"]["resourceVersion"] == "7", "on the version judged"

    created = ours(live_copy())
    created["metadata"]["managedFields"] = [
        {"manager": "aitenant-controller", "operation": "Update", "fieldsV1": {"f:spec": {}}}
    ]
    gone = ScriptedApi().on("CREATE", DEPLOYMENTS, ok(created, 201))  # unscripted GET: 404
    applier.client = gone.client()
    report = await applier.apply_all([Manifest(desired)], lambda _: None)
    assert report.created == [str(Manifest(desired))]
    assert [s.verb for s in gone.sent] == ["GET", "CREATE"], "created, nothing more"


async def test_an_object_without_our_labels_is_never_written() -> None:
    """The caches see only our labelled objects. Where they saw nothing, the object is created,
    never applied: one that exists anyway answers 409, is read, and is refused without a write
    whether its tracking labels name another tenant, none, or it is annotated to be kept
    (docs/contract.md §3.7, docs/differences.md D32); later passes only read it."""
    import pytest

    from aitenant import contract
    from aitenant.platform.apply import Applier, NotOursObject, OtherTenantsObject
    from aitenant.platform.render import Manifest

    from ..scripted_api import ScriptedApi, ok, status

    desired = ours(DESIRED)
    exists = status(409, "AlreadyExists", "already exists")
    api = ScriptedApi().on("CREATE", DEPLOYMENTS, exists)
    api.on("GET", PATH, ok(ours(live_copy(), "b")))
    with pytest.raises(OtherTenantsObject) as other:
        await Applier(api.client()).apply_all([Manifest(desired)], lambda _: None)
    assert "belongs to tenant b" in str(other.value)
    assert [s.verb for s in api.sent] == ["CREATE", "GET"], "no write over it"

    unlabelled = live_copy()
    unlabelled["metadata"].update(
        namespace="infra",
        labels={contract.LABEL_MANAGED_BY: "db-operator"},
        annotations={contract.ANNOTATION_OPENDATAHUB_MANAGED: "false"},
    )
    api = ScriptedApi().on("CREATE", DEPLOYMENTS, exists).on("GET", PATH, ok(unlabelled))
    applier = Applier(api.client())
    for _ in range(2):
        with pytest.raises(NotOursObject) as raised:
            await applier.apply_all([Manifest(desired)], lambda _: None)
        assert str(raised.value) == (
            "Deployment infra/maas-api-a is in the way: it exists, made by db-operator "
            "(app.kubernetes.io/managed-by) and annotated to be kept, without "
            "maas.opendatahub.io/tenant-name=a, and is not taken over; rename or delete it "
            "and the platform is applied"
        )
    assert [s.verb for s in api.sent] == ["CREATE", "GET", "GET"], "later passes only read"


async def test_an_object_changed_since_it_was_read_is_judged_again() -> None:
    """The apply holds the version judged: an opt-out written meanwhile answers 409 and the
    fresh copy is honoured, not written over."""
    from aitenant import contract
    from aitenant.platform.apply import Applier
    from aitenant.platform.render import Manifest

    from ..scripted_api import ScriptedApi, ok, status

    desired = ours(DESIRED)
    cached = ours(live_copy())
    cached["spec"]["replicas"] = 4  # drift: an apply is due
    kept = copy.deepcopy(cached)
    kept["metadata"]["annotations"] = {contract.ANNOTATION_OPENDATAHUB_MANAGED: "false"}
    changed = status(409, "Conflict", "the object has been modified")
    api = ScriptedApi().on("PATCH", PATH, changed).on("GET", PATH, ok(cached), ok(kept))
    report = await Applier(api.client()).apply_all([Manifest(desired)], lambda _: cached)
    assert report.unmanaged == [str(Manifest(desired))]
    assert [s.verb for s in api.sent] == ["GET", "PATCH", "GET"], "read before the write"
    assert api.sent[1].params.get("force") == "true"


def test_who_made_an_object_leaves_out_those_that_only_report_its_status() -> None:
    # A Deployment another controller made, once a kubelet runs it: the deployment controller
    # has written its status, nothing else.
    deployment = {
        "metadata": {
            "managedFields": [
                {"manager": "maas-controller", "operation": "Apply"},
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "subresource": "status",
                },
                {"manager": "kubectl-edit", "operation": "Update"},
            ]
        }
    }
    assert managers_of(deployment) == ["kubectl-edit", "maas-controller"]
    assert managers_of({"metadata": {}}) == []


async def test_a_created_object_is_owned_as_applied_only_when_it_must_be_applied() -> None:
    """A create records our fields as an Update entry. A pass that finds the object unchanged
    writes nothing; one that must apply first turns that entry into our Apply entry on the
    version judged (so the apply removes what it no longer renders), then applies on the
    version that gave. The caches keep no managedFields, so a write is judged on a fresh read;
    a conflict on the upgrade is judged again (docs/design.md §9.1)."""
    from aitenant.platform.apply import Applier
    from aitenant.platform.render import Manifest

    from ..scripted_api import ScriptedApi, ok, status

    desired = ours(DESIRED)
    cached = ours(live_copy())  # as the caches keep it: no managedFields
    api = ScriptedApi()
    applier = Applier(api.client())
    report = await applier.apply_all([Manifest(desired)], lambda _: cached)
    assert report.unchanged == 1
    assert api.sent == [], "unchanged: no read, no write"

    cached["spec"]["replicas"] = 4  # drift: an apply is due
    drifted = copy.deepcopy(cached)
    drifted["metadata"]["managedFields"] = [
        {"manager": "aitenant-controller", "operation": "Update", "fieldsV1": {"f:spec": {}}}
    ]
    upgraded = copy.deepcopy(drifted)
    upgraded["metadata"].update(resourceVersion="8")
    upgraded["metadata"]["managedFields"][0]["operation"] = "Apply"
    moved = status(409, "Conflict", "the object has been modified")
    api.on("PATCH", PATH, moved, ok(upgraded), ok(upgraded)).on("GET", PATH, ok(drifted))
    report = await applier.apply_all([Manifest(desired)], lambda _: cached)
    assert report.applied == [str(Manifest(desired))]
    assert [s.verb for s in api.sent] == ["GET", "PATCH", "GET", "PATCH", "PATCH"]
    first, upgrade, apply = api.sent[1], api.sent[3], api.sent[4]
    assert first.body == upgrade.body, "judged again after the conflict, the same upgrade"
    assert upgrade.body["metadata"]["resourceVersion"] == "7", "on the version judged"
    assert [e["operation"] for e in upgrade.body["metadata"]["managedFields"]] == ["Apply"]
    assert "fieldManager" in upgrade.params
    assert "force" not in upgrade.params
    assert apply.params.get("force") == "true"
    assert apply.body["metadata"]["resourceVersion"] == "8", "on the upgraded version"
