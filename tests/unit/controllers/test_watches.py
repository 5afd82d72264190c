"""What an informer event means to the controllers (each one's ``setup.py``, and the shared
``controllers/predicates.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from aitenant import contract
from aitenant.controllers.aitenant.setup import (
    annotated_owner,
    owners_of_config,
    requeue_aitenants,
    tenant_changed,
)
from aitenant.controllers.predicates import can_wait, status_overwritten
from aitenant.controllers.tenant_config.setup import (
    config_changed,
    config_key_of_tenant,
    platform_context_changed,
    requeue_configs,
    tracked_config_key,
)
from aitenant.runtime.control.controller import Key
from aitenant.settings import Settings

from .tenant_config.test_spec import config


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


def test_keys_from_the_namespace_and_tracking_labels() -> None:
    settings = Settings()
    # The annotations a tenant admin may write name no owner: the namespace does.
    claimed = config(
        annotations={
            contract.ANNOTATION_AITENANT_NAME: "blue",
            contract.ANNOTATION_AITENANT_NAMESPACE: "ai-tenants",
        }
    )
    assert owners_of_config(claimed, settings) == [Key("ai-tenants", "red")]
    shared = config(settings.maas_subscription_namespace)
    assert owners_of_config(shared, settings) == [Key("ai-tenants", "models-as-a-service")]
    assert owners_of_config(config("kube-system"), settings) == []
    # Only default-tenant belongs to an AITenant.
    assert owners_of_config(config(name="extra"), settings) == []
    red = {"metadata": {"namespace": "ai-tenants", "name": "red"}}
    assert config_key_of_tenant(red, settings) == Key("ai-tenant-red", "default-tenant")
    recorded = {**red, "status": {"tenantNamespace": "ai-tenant-red"}}
    assert config_key_of_tenant(recorded, settings) == Key("ai-tenant-red", "default-tenant")
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


def test_a_settled_or_new_object_seen_added_can_wait() -> None:
    ready = {
        "metadata": {"generation": 2},
        "status": {"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2}]},
    }
    assert can_wait("ADDED", ready)
    assert not can_wait("MODIFIED", ready)
    changed = {**ready, "metadata": {"generation": 3}}
    assert not can_wait("ADDED", changed), "Ready at an older generation: work to do"
    deleting = {**ready, "metadata": {"generation": 2, "deletionTimestamp": "x"}}
    assert not can_wait("ADDED", deleting)
    # Just created, never reconciled: tenants already begun go first.
    assert can_wait("ADDED", {"metadata": {"generation": 1}})
    assert not can_wait("MODIFIED", {"metadata": {"generation": 1}})
    begun = {"metadata": {"generation": 1}, "status": {"phase": "Pending"}}
    assert not can_wait("ADDED", begun), "under way (seen in a relist): no waiting"


def test_annotated_owner() -> None:
    owned = config(
        annotations={
            contract.ANNOTATION_AITENANT_NAME: "red",
            contract.ANNOTATION_AITENANT_NAMESPACE: "ai-tenants",
        }
    )
    assert annotated_owner(owned) == Key("ai-tenants", "red")
    assert annotated_owner(config()) is None


# -- the handlers: which event queues which key ----------------------------------------------
class FakeInformer:
    def __init__(self, index: dict[tuple[str, str], list[dict[str, Any]]] | None = None) -> None:
        self.handlers: list[Any] = []
        self.index = index or {}
        self.own_versions: set[str] = set()  # what ``ours`` answers True for
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}  # what ``get`` answers

    def ours(self, obj: dict[str, Any]) -> bool:
        return obj["metadata"].get("resourceVersion") in self.own_versions

    def add_handler(self, handler: Any) -> None:
        self.handlers.append(handler)

    def by_index(self, name: str, value: str) -> list[dict[str, Any]]:
        return self.index.get((name, value), [])

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((namespace, name))

    def list(self) -> list[dict[str, Any]]:
        return list(self.objects.values())

    def emit(self, event: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        for handler in self.handlers:
            handler(event, old, new)


class Enqueued:
    def __init__(self) -> None:
        self.keys: list[Key] = []

    def enqueue(self, key: Key, *, low_priority: bool = False) -> None:
        self.keys.append(key)


class RedUsesEveryGateway:
    def tenants_for_gateway(self, namespace: str, name: str) -> list[tuple[str, str]]:
        return [("ai-tenants", "red")]


@dataclass
class FakeCaches:
    configs: FakeInformer
    tenants: FakeInformer = field(default_factory=FakeInformer)
    gateways: FakeInformer = field(default_factory=FakeInformer)
    roles: FakeInformer = field(default_factory=FakeInformer)
    claims: FakeInformer = field(default_factory=FakeInformer)
    db_secret: FakeInformer = field(default_factory=FakeInformer)
    platform: FakeInformer = field(default_factory=FakeInformer)
    config_anchor: FakeInformer | None = None
    by_gateway: RedUsesEveryGateway = field(default_factory=RedUsesEveryGateway)


def gateway(generation: int) -> dict[str, Any]:
    return {"metadata": {"namespace": "gateways", "name": "gw", "generation": generation}}


def test_a_gateway_queues_its_tenants_unless_only_its_status_changed() -> None:
    caches, controller = FakeCaches(configs=FakeInformer()), Enqueued()
    requeue_aitenants(cast(Any, controller), cast(Any, caches), Settings())
    caches.gateways.emit("ADDED", None, gateway(1))
    caches.gateways.emit("MODIFIED", gateway(1), gateway(1))
    caches.gateways.emit("MODIFIED", gateway(1), gateway(2))
    caches.gateways.emit("DELETED", None, gateway(2))
    assert controller.keys == [Key("ai-tenants", "red")] * 3


def test_a_released_claim_queues_the_tenants_that_want_its_gateway() -> None:
    caches, controller = FakeCaches(configs=FakeInformer()), Enqueued()
    requeue_aitenants(cast(Any, controller), cast(Any, caches), Settings())
    claim = {
        "metadata": {"namespace": "ai-tenants", "name": "gateway-claim-x"},
        "data": {"gatewayNamespace": "gateways", "gatewayName": "gw"},
    }
    caches.claims.emit("ADDED", None, claim)
    caches.claims.emit("MODIFIED", claim, claim)
    assert controller.keys == [], "only a claim that goes frees the Gateway"
    caches.claims.emit("DELETED", None, claim)
    assert controller.keys == [Key("ai-tenants", "red")]


def test_a_gateway_queues_its_tenants_configs_when_it_comes_or_goes() -> None:
    owned = config(labels={contract.LABEL_TENANT_NAME: "red"})
    configs = FakeInformer()
    configs.objects[("ai-tenant-red", "default-tenant")] = owned
    caches, controller = FakeCaches(configs=configs), Enqueued()
    caches.tenants.objects[("ai-tenants", "red")] = {
        "metadata": {"namespace": "ai-tenants", "name": "red"},
        "status": {"tenantNamespace": "ai-tenant-red"},
    }
    requeue_configs(
        cast(Any, controller), cast(Any, caches), Settings(enable_tenant_namespace_discovery=True)
    )
    caches.gateways.emit("MODIFIED", gateway(1), gateway(2))  # existing is all the platform needs
    assert controller.keys == []
    caches.gateways.emit("DELETED", None, gateway(2))
    assert controller.keys == [Key("ai-tenant-red", "default-tenant")]


def test_the_db_secret_queues_every_config_served() -> None:
    """A tenant waiting for maas-db-config goes on when it appears, not at its next retry."""
    configs = FakeInformer()
    configs.objects[("ai-tenant-red", "default-tenant")] = config(
        labels={contract.LABEL_TENANT_NAME: "red"}
    )
    configs.objects[("ai-tenant-red", "copy")] = config(name="copy")
    caches, controller = FakeCaches(configs=configs), Enqueued()
    requeue_configs(
        cast(Any, controller), cast(Any, caches), Settings(enable_tenant_namespace_discovery=True)
    )
    secret = {"metadata": {"namespace": "aitenant-system", "name": "maas-db-config"}}
    caches.db_secret.emit("ADDED", None, secret)
    assert controller.keys == [Key("ai-tenant-red", "default-tenant")]


def with_status(obj: dict[str, Any], rv: str, phase: str) -> dict[str, Any]:
    return {
        **obj,
        "metadata": {**obj["metadata"], "resourceVersion": rv},
        "status": {"phase": phase},
    }


def test_a_status_someone_else_wrote_queues_the_tenant_at_once() -> None:
    caches, controller = FakeCaches(configs=FakeInformer()), Enqueued()
    requeue_aitenants(cast(Any, controller), cast(Any, caches), Settings())
    tenant = {"metadata": {"namespace": "ai-tenants", "name": "red", "generation": 1}}
    active = with_status(tenant, "10", "Active")
    caches.tenants.own_versions.add("11")
    caches.tenants.emit("MODIFIED", active, with_status(tenant, "11", "Pending"))  # our write
    assert controller.keys == []
    caches.tenants.emit("MODIFIED", active, with_status(tenant, "12", "Failed"))  # theirs
    assert controller.keys == [Key("ai-tenants", "red")]
    caches.tenants.emit("MODIFIED", active, with_status(tenant, "13", "Active"))  # status unchanged
    assert controller.keys == [Key("ai-tenants", "red")]


def test_a_status_someone_else_wrote_queues_the_config_at_once() -> None:
    owned = config(labels={contract.LABEL_TENANT_NAME: "red"})
    owned["metadata"]["namespace"] = Settings().maas_subscription_namespace
    caches, controller = FakeCaches(configs=FakeInformer()), Enqueued()
    requeue_configs(cast(Any, controller), cast(Any, caches), Settings())
    ready = with_status(owned, "10", "Active")
    caches.configs.own_versions.add("11")
    caches.configs.emit("MODIFIED", ready, with_status(owned, "11", "Pending"))
    assert controller.keys == []
    caches.configs.emit("MODIFIED", ready, with_status(owned, "12", "Failed"))
    assert controller.keys == [Key(owned["metadata"]["namespace"], "default-tenant")]


def test_status_overwritten_only_by_someone_else() -> None:
    old = with_status({"metadata": {"name": "a"}}, "1", "Active")
    new = with_status({"metadata": {"name": "a"}}, "2", "Failed")
    assert status_overwritten("MODIFIED", old, new, ours=False)
    assert not status_overwritten("MODIFIED", old, new, ours=True)
    assert not status_overwritten("MODIFIED", old, {**new, "status": old["status"]}, ours=False)
    assert not status_overwritten("ADDED", None, new, ours=False)
