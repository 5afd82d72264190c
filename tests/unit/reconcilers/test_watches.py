"""What an informer event means to the controllers (``reconcilers/watches.py``)."""

from __future__ import annotations

from aitenant import contract
from aitenant.reconcilers.watches import (
    annotated_owner,
    config_changed,
    owner_index_key,
    platform_context_changed,
    settled,
    tenant_changed,
    tracked_config_key,
)
from aitenant.runtime.controller import Key

from .test_config_spec import config


def test_platform_context_changed() -> None:
    base = {"metadata": {}, "spec": {}, "status": {"phase": "Pending"}}
    assert platform_context_changed(None, base)
    assert not platform_context_changed(base, {**base, "status": {"phase": "Active"}})
    with_ref = {**base, "status": {"gatewayRef": {"name": "gw", "namespace": "gws"}}}
    assert platform_context_changed(base, with_ref)
    # spec.oidc goes to the Gateway AuthPolicy, which the MaaSAuthPolicy controller owns.
    with_oidc = {**base, "spec": {"oidc": {"issuerUrl": "https://x", "clientId": "c"}}}
    assert not platform_context_changed(base, with_oidc)


def test_config_changed_ignores_status_only_updates() -> None:
    old = config()
    new = {**config(), "status": {"phase": "Active"}}
    new["metadata"]["resourceVersion"] = "9"
    assert not config_changed(old, new)
    assert config_changed(None, new)
    spec_edit = config()
    spec_edit["metadata"]["generation"] = 2
    assert config_changed(old, spec_edit)
    relabelled = config(labels={"x": "y"})
    assert config_changed(old, relabelled)


def test_keys_from_owner_annotations_and_tracking_labels() -> None:
    owned = config(
        annotations={
            contract.ANNOTATION_AITENANT_NAME: "red",
            contract.ANNOTATION_AITENANT_NAMESPACE: "ai-tenants",
        }
    )
    assert owner_index_key(owned) == ["ai-tenants/red"]
    assert owner_index_key(config()) == []
    # Only default-tenant belongs to an AITenant, whatever another config's annotations say.
    assert owner_index_key({**owned, "metadata": {**owned["metadata"], "name": "extra"}}) == []
    platform_object = {
        "metadata": {
            "labels": {
                contract.LABEL_TENANT_NAME: "red",
                contract.LABEL_TENANT_NAMESPACE: "ai-tenant-red",
            }
        }
    }
    key = tracked_config_key(platform_object)
    assert key == ("ai-tenant-red", "default-tenant")
    assert tracked_config_key({"metadata": {"labels": {}}}) is None


def test_tenant_changed_on_generation_or_new_deletion_only() -> None:
    old = {"metadata": {"generation": 1}}
    assert tenant_changed("ADDED", None, old)
    assert tenant_changed("DELETED", old, old)
    assert not tenant_changed("MODIFIED", old, {"metadata": {"generation": 1}, "status": {}})
    assert tenant_changed("MODIFIED", old, {"metadata": {"generation": 2}})
    deleting = {"metadata": {"generation": 1, "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert tenant_changed("MODIFIED", old, deleting)
    assert not tenant_changed("MODIFIED", deleting, deleting)


def test_settled_is_a_ready_object_seen_in_a_list() -> None:
    ready = {
        "metadata": {"generation": 2},
        "status": {"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2}]},
    }
    assert settled("ADDED", ready)
    assert not settled("MODIFIED", ready)
    assert not settled("ADDED", {**ready, "metadata": {"generation": 3}})
    deleting = {**ready, "metadata": {"generation": 2, "deletionTimestamp": "x"}}
    assert not settled("ADDED", deleting)


def test_annotated_owner() -> None:
    owned = config(
        annotations={
            contract.ANNOTATION_AITENANT_NAME: "red",
            contract.ANNOTATION_AITENANT_NAMESPACE: "ai-tenants",
        }
    )
    assert annotated_owner(owned) == Key("ai-tenants", "red")
    assert annotated_owner(config()) is None
