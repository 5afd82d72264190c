"""What the remove hook deletes from the cluster, and what it leaves alone.

Removing the application deletes the webhook configuration, the ClusterRoleBinding, the
admission policy and its binding, the webhook port's NetworkPolicy and our Roles everywhere;
CRDs and ClusterRoles stay, removing one unit deletes nothing, and objects already gone are
no error.
"""

from __future__ import annotations

from lightkube.resources.admissionregistration_v1 import (
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
)
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.networking_v1 import NetworkPolicy
from lightkube.resources.rbac_authorization_v1 import (
    ClusterRole,
    ClusterRoleBinding,
    Role,
    RoleBinding,
)
from tests.juju.kit import APP, MODEL, CharmKit, api_error
from tests.unit.charm.cluster_objects import AITENANT_NS, OURS, PREFIX, stored_object


def test_remove_of_the_application_deletes_only_the_webhook_binding_and_policy(
    ready: CharmKit,
):
    # GIVEN a deployed application that is being removed entirely
    ready.replace(planned_units=0)
    # WHEN the remove hook runs
    ready.emit("remove")
    # THEN the webhook configuration, binding, admission policy and pods' policy go, CRDs and
    # ClusterRoles never do
    deleted = [call.args for call in ready.kube.delete.call_args_list]
    assert deleted == [
        (ValidatingWebhookConfiguration, OURS),
        (ClusterRoleBinding, OURS),
        (ValidatingAdmissionPolicyBinding, OURS),
        (ValidatingAdmissionPolicy, OURS),
        (NetworkPolicy, f"{APP}-webhook"),
    ]
    for kind, _ in deleted:
        assert kind is not CustomResourceDefinition
        assert kind is not ClusterRole
    ready.kube.deletecollection.assert_not_called()


def test_removing_one_unit_deletes_nothing(ready: CharmKit):
    # GIVEN an application that keeps other units
    ready.replace(planned_units=2)
    # WHEN one unit's remove hook runs
    ready.emit("remove")
    # THEN nothing is deleted
    ready.kube.delete.assert_not_called()


def test_remove_tolerates_objects_already_gone(ready: CharmKit):
    # GIVEN objects that were already deleted
    ready.replace(planned_units=0)
    ready.kube.delete.side_effect = api_error(404, "not found")
    # WHEN the remove hook runs
    ready.emit("remove")
    # THEN it finishes without error, having tried each
    assert ready.kube.delete.call_count == 5


def test_remove_deletes_our_roles_everywhere(ready: CharmKit):
    stored = {
        Role: [
            stored_object(Role, "maas-infra", f"{PREFIX}-platform"),
            stored_object(Role, AITENANT_NS, f"{PREFIX}-claims"),
            stored_object(Role, "x", "other"),
        ],
        RoleBinding: [stored_object(RoleBinding, MODEL, f"{PREFIX}-leader-election")],
    }
    ready.kube.list.side_effect = lambda kind, *a, **kw: iter(stored.get(kind, []))  # pyright: ignore[reportUnknownLambdaType]
    ready.replace(planned_units=0)
    ready.emit("remove")
    deleted = {
        (c.args[0].__name__, c.kwargs.get("namespace"), c.args[1])
        for c in ready.kube.delete.call_args_list
        if c.args[0] in (Role, RoleBinding)
    }
    assert deleted == {
        ("Role", "maas-infra", f"{PREFIX}-platform"),
        ("Role", AITENANT_NS, f"{PREFIX}-claims"),
        ("RoleBinding", MODEL, f"{PREFIX}-leader-election"),
    }
