"""Planning the infra-namespace gateway selector labels and their ownership ledger."""

from __future__ import annotations

import json

import pytest

from aitenant.controllers.aitenant.infra_labels import (
    LEDGER,
    LabelConflict,
    desired_labels,
    plan_ensure,
    plan_release,
)


def gw(*listeners: dict) -> dict:
    return {"metadata": {"namespace": "gws", "name": "g1"}, "spec": {"listeners": list(listeners)}}


def listener(name: str, labels: dict[str, str] | None, from_: str = "Selector") -> dict:
    ns: dict = {"from": from_}
    if labels is not None:
        ns["selector"] = {"matchLabels": labels, "matchExpressions": [{"key": "ignored"}]}
    return {"name": name, "allowedRoutes": {"namespaces": ns}}


def test_desired_labels_unions_selector_listeners_only() -> None:
    gateway = gw(
        listener("a", {"x": "1"}),
        listener("b", {"y": "2"}),
        listener("c", {"z": "3"}, from_="All"),
        listener("d", None),
    )
    assert desired_labels(gateway) == {"x": "1", "y": "2"}


def test_conflicting_listeners_are_reported() -> None:
    with pytest.raises(LabelConflict, match=r'label "x": listener "b" wants "2"'):
        desired_labels(gw(listener("a", {"x": "1"}), listener("b", {"x": "2"})))


def test_first_ensure_sets_label_and_ledger_then_nothing_to_do() -> None:
    patch = plan_ensure(
        namespace="infra", labels={}, annotations={}, gateway_name="g1", wanted={"x": "1"}
    )
    assert patch == {"metadata": {"annotations": {LEDGER: '{"x":["g1"]}'}, "labels": {"x": "1"}}}
    again = plan_ensure(
        namespace="infra",
        labels={"x": "1"},
        annotations={LEDGER: '{"x":["g1"]}'},
        gateway_name="g1",
        wanted={"x": "1"},
    )
    assert again is None


def test_label_set_outside_the_controller_is_a_conflict() -> None:
    with pytest.raises(LabelConflict, match="set outside the controller"):
        plan_ensure(
            namespace="infra",
            labels={"x": "0"},
            annotations={},
            gateway_name="g1",
            wanted={"x": "1"},
        )


def test_label_owned_by_another_gateway_is_a_conflict() -> None:
    with pytest.raises(LabelConflict, match='owned by gateway "g2"'):
        plan_ensure(
            namespace="infra",
            labels={"x": "0"},
            annotations={LEDGER: '{"x":["g2"]}'},
            gateway_name="g1",
            wanted={"x": "1"},
        )


def test_shared_label_gains_an_owner_and_stale_keys_are_dropped() -> None:
    patch = plan_ensure(
        namespace="infra",
        labels={"x": "1", "old": "v"},
        annotations={LEDGER: json.dumps({"x": ["g2"], "old": ["g1"]})},
        gateway_name="g1",
        wanted={"x": "1"},
    )
    assert patch is not None
    assert json.loads(patch["metadata"]["annotations"][LEDGER]) == {"x": ["g2", "g1"]}
    assert patch["metadata"]["labels"] == {"old": None}


def test_release_keeps_co_owned_labels() -> None:
    patch = plan_release(
        namespace="infra",
        labels={"x": "1", "y": "2", "unrelated": "u"},
        annotations={LEDGER: json.dumps({"x": ["g1", "g2"], "y": ["g1"]})},
        gateway_name="g1",
    )
    assert patch is not None
    assert json.loads(patch["metadata"]["annotations"][LEDGER]) == {"x": ["g2"]}
    assert patch["metadata"]["labels"] == {"y": None}
    last = plan_release(
        namespace="infra",
        labels={"x": "1"},
        annotations={LEDGER: '{"x":["g2"]}'},
        gateway_name="g2",
    )
    assert last == {"metadata": {"annotations": {LEDGER: None}, "labels": {"x": None}}}


def test_unparseable_ledger_is_reported() -> None:
    with pytest.raises(LabelConflict, match="unmarshal"):
        plan_release(namespace="infra", labels={}, annotations={LEDGER: "{nope"}, gateway_name="g")
