"""Teardown (the prepare-removal action) and one deployment per cluster."""

from __future__ import annotations

import datetime
from typing import Any
from unittest.mock import MagicMock

import ops
import pytest
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding, Role
from lightkube.types import PatchType
from ops import testing
from tests.juju.kit import APP, MODEL, CharmKit, api_error

import charm
from aitenant import contract
from aitenant_charm.cluster_manifests import (
    AITENANT,
    CONTROLLER_CLUSTER_ROLE,
    MANAGED_BY_LABEL,
    cluster_scoped_name,
)
from aitenant_charm.workload import SERVICE

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def binding(model: str, app: str, created: datetime.datetime) -> ClusterRoleBinding:
    return ClusterRoleBinding(
        metadata=ObjectMeta(
            name=cluster_scoped_name(app, model),
            labels=dict(MANAGED_BY_LABEL),
            creationTimestamp=created,
        ),
        roleRef=RoleRef(
            apiGroup="rbac.authorization.k8s.io",
            kind="ClusterRole",
            name=CONTROLLER_CLUSTER_ROLE,
        ),
        subjects=[Subject(kind="ServiceAccount", name=app, namespace=model)],
    )


def cluster_with(kube: MagicMock, **by_kind: list[Any]) -> None:
    """kube.list answers per resource class name; everything else is empty."""

    def answer(res: Any, *args: Any, **kwargs: Any):
        return iter(by_kind.get(res.__name__, []))

    kube.list.side_effect = answer


# --- One deployment per cluster -----------------------------------------------------------


def test_second_deployment_blocks_naming_the_other_model(kit: CharmKit):
    # GIVEN model "prod" deployed the charm on this cluster before us
    cluster_with(kit.kube, ClusterRoleBinding=[binding("prod", APP, T0)])
    kit.integrate_gateway()
    kit.integrate_maas_api()
    # WHEN this deployment reconciles
    kit.reconcile()
    # THEN it is blocked with a message naming the other model
    status = kit.status()
    assert isinstance(status, ops.BlockedStatus)
    assert "'prod'" in status.message
    assert "aitenant.prod.aitenant-k8s" in status.message
    # AND it applied nothing to the cluster and planned no controller
    kit.kube.apply.assert_not_called()
    assert SERVICE not in kit.plan().services


def test_first_deployment_keeps_running_when_a_later_one_appears(ready: CharmKit):
    # GIVEN our binding exists, and model "staging" bound the role later
    ours = binding(MODEL, APP, T0)
    later = binding("staging", APP, T0 + datetime.timedelta(hours=1))
    cluster_with(ready.kube, ClusterRoleBinding=[ours, later])
    # WHEN we reconcile
    ready.emit("update_status")
    # THEN we stay active: the later deployment is the one that blocks
    assert ready.status() == ops.ActiveStatus("0 tenants")


def test_bindings_of_other_roles_are_not_deployments(kit: CharmKit):
    # GIVEN a binding labelled as ours for another ClusterRole
    other = binding("prod", APP, T0)
    other.roleRef.name = "maas-api"
    cluster_with(kit.kube, ClusterRoleBinding=[other])
    kit.make_ready()
    # WHEN the status is computed
    # THEN it does not count as another deployment
    assert kit.status() == ops.ActiveStatus("0 tenants")


def test_blocked_deployment_stops_a_running_controller(ready: CharmKit):
    # GIVEN a running controller
    assert ready.service_running()
    # WHEN another, older deployment shows up (our binding is newer)
    ours = binding(MODEL, APP, T0 + datetime.timedelta(hours=1))
    cluster_with(ready.kube, ClusterRoleBinding=[ours, binding("prod", APP, T0)])
    ready.emit("update_status")
    # THEN our controller is stopped: one leader per cluster
    assert not ready.service_running()
    assert isinstance(ready.status(), ops.BlockedStatus)


def test_blocked_deployment_removal_deletes_nothing(kit: CharmKit):
    # GIVEN a blocked second deployment
    cluster_with(kit.kube, ClusterRoleBinding=[binding("prod", APP, T0)])
    kit.replace(planned_units=0)
    # WHEN it is removed
    kit.emit("remove")
    # THEN it deletes no cluster object
    kit.kube.delete.assert_not_called()


# --- Juju's own objects ---------------------------------------------------------------------

# With `--trust` Juju names its ClusterRole and ClusterRoleBinding `<model>-<app>`.
JUJU_TRUST = f"{MODEL}-{APP}"


def juju_trust_objects() -> dict[str, list[Any]]:
    """Juju's trust ClusterRole and ClusterRoleBinding, and a Role named as the charm named
    its Roles when its prefix was `<model>-<app>` (labelled as ours, to be sure the name alone
    keeps it)."""
    juju = {"app.kubernetes.io/managed-by": "juju"}
    return {
        "ClusterRole": [ClusterRole(metadata=ObjectMeta(name=JUJU_TRUST, labels=juju))],
        "ClusterRoleBinding": [
            ClusterRoleBinding(
                metadata=ObjectMeta(name=JUJU_TRUST, labels=juju),
                roleRef=RoleRef(
                    apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name=JUJU_TRUST
                ),
                subjects=[Subject(kind="ServiceAccount", name=APP, namespace=MODEL)],
            )
        ],
        "Role": [
            Role(
                metadata=ObjectMeta(
                    name=f"{name}-leader-election", namespace=MODEL, labels=dict(MANAGED_BY_LABEL)
                )
            )
            for name in (JUJU_TRUST, cluster_scoped_name(APP, MODEL))
        ],
    }


def test_removal_never_deletes_what_juju_named_for_the_application(ready: CharmKit):
    # GIVEN the cluster holds Juju's trust objects besides ours
    cluster_with(ready.kube, **juju_trust_objects())
    ready.replace(planned_units=0)
    # WHEN the operator prepares the removal and the last unit's remove hook runs
    ready.run_action(charm.PREPARE_REMOVAL_ACTION)
    ready.emit("remove")
    # THEN no object named `<model>-<app>` (nor a Role of that prefix) was deleted
    deleted = [(call.args[0].__name__, call.args[1]) for call in ready.kube.delete.call_args_list]
    assert [d for d in deleted if d[1] == JUJU_TRUST or d[1].startswith(f"{JUJU_TRUST}-")] == []
    # AND ours were
    assert ("ClusterRoleBinding", cluster_scoped_name(APP, MODEL)) in deleted
    assert ("Role", f"{cluster_scoped_name(APP, MODEL)}-leader-election") in deleted


def test_the_charm_never_writes_an_object_named_as_juju_s(ready: CharmKit):
    # GIVEN a healthy deployment that reconciled
    # THEN nothing it applied or created has Juju's `<model>-<app>` name
    written = [
        call.args[0].metadata.name
        for call in [*ready.kube.apply.call_args_list, *ready.kube.create.call_args_list]
    ]
    assert written
    assert [name for name in written if name == JUJU_TRUST] == []


# --- prepare-removal ----------------------------------------------------------------------


def tenant(name: str, finalizers: list[str], resource_version: str = "7") -> Any:
    obj = AITENANT.from_dict(  # pyright: ignore[reportAttributeAccessIssue]
        {
            "apiVersion": "maas.opendatahub.io/v1alpha1",
            "kind": "AITenant",
            "metadata": {
                "name": name,
                "namespace": "ai-tenants",
                "finalizers": finalizers,
                "resourceVersion": resource_version,
            },
        }
    )
    return obj


def test_prepare_removal_stops_the_controller_and_releases_finalizers(ready: CharmKit):
    # GIVEN two tenants with our finalizer (one also with someone else's) and one without
    other = "example.com/keep"
    tenants = [
        tenant("a", [contract.AITENANT_FINALIZER]),
        tenant("b", [other, contract.AITENANT_FINALIZER]),
        tenant("c", []),
    ]
    cluster_with(ready.kube, AITenant=tenants)
    # WHEN the operator runs the action
    output = ready.run_action(charm.PREPARE_REMOVAL_ACTION)
    # THEN it reports what it released
    assert output.results == {
        "aitenants": "ai-tenants/a ai-tenants/b",
        "maastenantconfigs": "none",
        "released": "2",
    }
    # AND each patch drops only our finalizer, guarded by the resourceVersion
    patches = {c.args[1]: c for c in ready.kube.patch.call_args_list}
    assert set(patches) == {"a", "b"}
    assert patches["b"].args[2] == {"metadata": {"finalizers": [other], "resourceVersion": "7"}}
    assert patches["a"].kwargs["patch_type"] == PatchType.MERGE
    # AND the controller is stopped and the webhook configuration deleted; nothing else is
    ready.kube.delete.assert_called_once_with(
        ValidatingWebhookConfiguration, cluster_scoped_name(APP, MODEL)
    )
    assert not ready.service_running()


def test_after_prepare_removal_the_controller_stays_stopped(ready: CharmKit):
    # GIVEN a prepared removal
    ready.run_action(charm.PREPARE_REMOVAL_ACTION)
    ready.kube.apply.reset_mock()
    # WHEN later events reconcile
    ready.emit("config_changed")
    ready.reconcile()
    # THEN nothing restarts the controller or re-applies cluster objects
    assert not ready.service_running()
    ready.kube.apply.assert_not_called()
    # AND the status tells the operator the next step
    status = ready.status()
    assert isinstance(status, ops.BlockedStatus)
    assert f"juju remove-application {APP}" in status.message


def test_prepare_removal_refuses_with_several_units(ready: CharmKit):
    # GIVEN three planned units
    ready.replace(planned_units=3)
    # WHEN the action runs
    # THEN it fails, telling how to scale down, and changed nothing
    with pytest.raises(testing.ActionFailed, match="juju scale-application aitenant-k8s 1"):
        ready.run_action(charm.PREPARE_REMOVAL_ACTION)
    ready.kube.patch.assert_not_called()
    assert ready.service_running()


def test_prepare_removal_runs_on_the_leader_only(ready: CharmKit):
    ready.set_leader(False)
    with pytest.raises(testing.ActionFailed, match="leader"):
        ready.run_action(charm.PREPARE_REMOVAL_ACTION)
    ready.kube.patch.assert_not_called()


def test_prepare_removal_retries_a_conflicting_patch_on_a_fresh_read(ready: CharmKit):
    # GIVEN a tenant whose first patch meets a concurrent change (409)
    stale = tenant("a", [contract.AITENANT_FINALIZER])
    fresh = tenant("a", ["example.com/new", contract.AITENANT_FINALIZER], resource_version="8")
    cluster_with(ready.kube, AITenant=[stale])
    ready.kube.patch.side_effect = [api_error(409, "the object has been modified"), fresh]
    ready.kube.get.side_effect = None
    ready.kube.get.return_value = fresh
    # WHEN the action runs
    output = ready.run_action(charm.PREPARE_REMOVAL_ACTION)
    # THEN the second patch works from the fresh copy, keeping the newcomer's finalizer
    assert output.results["aitenants"] == "ai-tenants/a"
    last = ready.kube.patch.call_args_list[-1]
    assert last.args[2] == {"metadata": {"finalizers": ["example.com/new"], "resourceVersion": "8"}}
