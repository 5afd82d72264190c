"""The namespaced Roles and RoleBindings the charm applies, and where each lives.

The Lease Role in the model's namespace, the platform Role in the infra namespace, the claims
Role in the AITenant namespace (created first if missing), the gateway Role in the gateway's
namespace; each moves when its namespace option changes (the old one deleted, only if ours),
and a missing namespace is named in a waiting status.
"""

from __future__ import annotations

from typing import Any

import ops
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.rbac_authorization_v1 import ClusterRole, Role, RoleBinding
from tests.juju.kit import APP, DEFAULT_MAAS_API, MODEL, CharmKit, api_error
from tests.unit.charm.cluster_objects import AITENANT_NS, PREFIX, stored_object, where

from aitenant import contract
from aitenant_charm.cluster_manifests import CHARM_LABELS

GATEWAY_NS = "istio-gw"  # CharmKit.integrate_gateway's


def test_the_gateway_role_follows_the_gateway_namespace_option(ready: CharmKit):
    # GIVEN the gateway Role in the namespace the `gateway` relation named
    stored = {
        Role: [stored_object(Role, GATEWAY_NS, f"{PREFIX}-gateway")],
        RoleBinding: [stored_object(RoleBinding, GATEWAY_NS, f"{PREFIX}-gateway")],
    }
    ready.kube.list.side_effect = lambda kind, *a, **kw: iter(stored.get(kind, []))  # pyright: ignore[reportUnknownLambdaType]
    ready.kube.apply.reset_mock()
    # WHEN the operator sets another gateway namespace (config wins over the relation)
    ready.configure(gateway_namespace="other-gw")
    # THEN the Role is applied there and ours in the relation's namespace are deleted
    assert ("Role", "other-gw", f"{PREFIX}-gateway") in where(ready.applied(Role))
    deleted = {
        (c.args[0].__name__, c.kwargs.get("namespace"), c.args[1])
        for c in ready.kube.delete.call_args_list
    }
    assert deleted == {
        ("Role", GATEWAY_NS, f"{PREFIX}-gateway"),
        ("RoleBinding", GATEWAY_NS, f"{PREFIX}-gateway"),
    }
    assert ready.flags()["gateway-namespace"] == "other-gw"


def test_no_gateway_role_while_no_gateway_is_known(kit: CharmKit):
    # GIVEN maas-api but neither the `gateway` relation nor gateway config
    kit.integrate_maas_api()
    kit.reconcile()
    # THEN the other Roles are applied, no gateway Role (and none is deleted)
    names = {name for _, _, name in where(kit.applied(Role))}
    assert f"{PREFIX}-claims" in names
    assert f"{PREFIX}-gateway" not in names
    kit.kube.delete.assert_not_called()


def test_missing_gateway_namespace_waits_and_names_it(ready: CharmKit):
    def apply(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if obj.metadata and obj.metadata.namespace == "nowhere":
            raise api_error(404, 'namespaces "nowhere" not found')
        return obj

    ready.kube.apply.side_effect = apply
    ready.configure(gateway_namespace="nowhere")
    status = ready.status()
    assert isinstance(status, ops.WaitingStatus)
    assert "gateway namespace 'nowhere' does not exist" in status.message


def test_the_aitenant_namespace_is_created_before_its_role(kit: CharmKit):
    # GIVEN a cluster without the AITenant namespace (the controller has never started)
    order: list[str] = []
    kit.kube.create.side_effect = lambda obj, *a, **kw: order.append(f"create {obj.metadata.name}")  # pyright: ignore[reportUnknownLambdaType]

    def apply(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(obj, Role) and obj.metadata and obj.metadata.namespace == AITENANT_NS:
            order.append("apply claims Role")
        return obj

    kit.kube.apply.side_effect = apply
    # WHEN the leader reconciles
    kit.make_ready()
    # THEN the charm creates the namespace, labelled as the controller creates it, then the Role
    assert order[:2] == [f"create {AITENANT_NS}", "apply claims Role"]
    created = kit.kube.create.call_args_list[0].args[0]
    assert isinstance(created, Namespace)
    assert created.metadata
    assert created.metadata.labels == contract.MANAGED_NAMESPACE_LABELS


def test_an_existing_aitenant_namespace_is_left_alone(kit: CharmKit):
    # GIVEN the AITenant namespace exists
    def get(kind: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        if kind is Namespace:
            return Namespace(metadata=ObjectMeta(name=name))
        raise api_error(404, "not found")

    kit.kube.get.side_effect = get
    # WHEN the leader reconciles
    kit.make_ready()
    # THEN nothing is created, the claims Role is applied there
    kit.kube.create.assert_not_called()
    assert ("Role", AITENANT_NS, f"{PREFIX}-claims") in where(kit.applied(Role))


def test_changing_aitenant_namespace_moves_the_claims_role_and_deletes_the_old_one(
    ready: CharmKit,
):
    # GIVEN the claims Role and binding in the old AITenant namespace
    stored = {
        Role: [
            stored_object(Role, AITENANT_NS, f"{PREFIX}-claims"),
            stored_object(Role, "maas-infra", f"{PREFIX}-platform"),
        ],
        RoleBinding: [stored_object(RoleBinding, AITENANT_NS, f"{PREFIX}-claims")],
    }
    ready.kube.list.side_effect = lambda kind, *a, **kw: iter(stored.get(kind, []))  # pyright: ignore[reportUnknownLambdaType]
    ready.kube.apply.reset_mock()
    # WHEN the operator points the controller at another AITenant namespace
    ready.configure(aitenant_namespace="other-tenants")
    # THEN the claims Role is applied there, and ours in the old namespace are deleted
    assert ("Role", "other-tenants", f"{PREFIX}-claims") in where(ready.applied(Role))
    deleted = {
        (c.args[0].__name__, c.kwargs.get("namespace"), c.args[1])
        for c in ready.kube.delete.call_args_list
    }
    assert deleted == {
        ("Role", AITENANT_NS, f"{PREFIX}-claims"),
        ("RoleBinding", AITENANT_NS, f"{PREFIX}-claims"),
    }
    assert ready.flags()["aitenant-namespace"] == "other-tenants"


def test_lease_role_in_the_model_and_platform_role_in_the_infra_namespace(ready: CharmKit):
    # GIVEN maas-api says its infra namespace is maas-infra
    # WHEN the leader reconciles
    ready.kube.apply.reset_mock()
    ready.reconcile()
    roles = ready.applied(Role)
    bindings = ready.applied(RoleBinding)
    # THEN the Lease Role lives in the model's namespace, the platform Role in maas-infra, the
    # claims Role in the AITenant namespace
    assert where(roles) == {
        ("Role", MODEL, f"{PREFIX}-leader-election"),
        ("Role", "maas-infra", f"{PREFIX}-platform"),
        ("Role", AITENANT_NS, f"{PREFIX}-claims"),
        ("Role", GATEWAY_NS, f"{PREFIX}-gateway"),
    }
    assert where(bindings) == {
        ("RoleBinding", MODEL, f"{PREFIX}-leader-election"),
        ("RoleBinding", "maas-infra", f"{PREFIX}-platform"),
        ("RoleBinding", AITENANT_NS, f"{PREFIX}-claims"),
        ("RoleBinding", GATEWAY_NS, f"{PREFIX}-gateway"),
    }
    for binding in bindings:
        assert binding.subjects
        [subject] = binding.subjects
        assert (subject.kind, subject.name, subject.namespace) == ("ServiceAccount", APP, MODEL)
        assert binding.metadata
        assert binding.metadata.labels == CHARM_LABELS
    # AND the controller's ClusterRole no longer grants Leases or Secrets anywhere
    [controller_role] = [
        r
        for r in ready.applied(ClusterRole)
        if r.metadata and r.metadata.name == "aitenant-controller"
    ]
    resources = {res for rule in controller_role.rules or [] for res in rule.resources or []}
    assert not {"leases", "secrets", "configmaps", "authpolicies"} & resources


def test_without_an_infra_namespace_the_platform_role_is_in_the_model(kit: CharmKit):
    # GIVEN maas-api that names no infra namespace: the controller defaults to its own
    kit.integrate_gateway()
    kit.integrate_maas_api(DEFAULT_MAAS_API.model_copy(update={"infra_namespace": ""}))
    kit.reconcile()
    # THEN the Lease and platform Roles are in the model's namespace
    names = (f"{PREFIX}-leader-election", f"{PREFIX}-platform")
    assert {ns for _, ns, name in where(kit.applied(Role)) if name in names} == {MODEL}


def test_changing_infra_namespace_moves_the_platform_role_and_deletes_the_old_one(
    ready: CharmKit,
):
    # GIVEN the platform Role and binding in the old infra namespace, and a user's Role there
    stored = {
        Role: [
            stored_object(Role, "maas-infra", f"{PREFIX}-platform"),
            stored_object(Role, MODEL, f"{PREFIX}-leader-election"),
            stored_object(Role, "maas-infra", "someone-elses", managed=True),
        ],
        RoleBinding: [stored_object(RoleBinding, "maas-infra", f"{PREFIX}-platform")],
    }
    ready.kube.list.side_effect = lambda kind, *a, **kw: iter(stored.get(kind, []))  # pyright: ignore[reportUnknownLambdaType]
    ready.kube.apply.reset_mock()
    # WHEN the operator points the controller at another infra namespace
    ready.configure(infra_namespace="tenant-infra")
    # THEN the platform Role is applied there, and only ours in the old namespace are deleted
    assert ("Role", "tenant-infra", f"{PREFIX}-platform") in where(ready.applied(Role))
    deleted = {
        (c.args[0].__name__, c.kwargs.get("namespace"), c.args[1])
        for c in ready.kube.delete.call_args_list
    }
    assert deleted == {
        ("Role", "maas-infra", f"{PREFIX}-platform"),
        ("RoleBinding", "maas-infra", f"{PREFIX}-platform"),
    }
    # AND the controller is told the new namespace
    assert ready.flags()["infra-namespace"] == "tenant-infra"


def test_missing_infra_namespace_waits_and_names_it(ready: CharmKit):
    # GIVEN an infra namespace that does not exist
    def apply(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if obj.metadata and obj.metadata.namespace == "nowhere":
            raise api_error(404, 'namespaces "nowhere" not found')
        return obj

    ready.kube.apply.side_effect = apply
    # WHEN the operator sets it
    ready.configure(infra_namespace="nowhere")
    # THEN the unit waits and says what to do
    status = ready.status()
    assert isinstance(status, ops.WaitingStatus)
    assert "infra namespace 'nowhere' does not exist" in status.message
    assert "`infra-namespace`" in status.message
