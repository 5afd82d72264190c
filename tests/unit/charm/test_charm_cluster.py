"""Cluster-scoped objects: CRDs, the controller's ClusterRole and binding, the admission policy.

The leader server-side applies them with the charm's field manager, non-leaders apply nothing,
the CRDs are re-applied (never deleted) and keep their CEL rules, an API server older than 1.32
blocks before anything is written, and everything the charm writes carries the label Juju's
model webhook skips. The webhook configuration is in test_charm_webhook.py, the namespaced
Roles in test_charm_namespaced_roles.py, what removal deletes in test_charm_cluster_removal.py.
"""

from __future__ import annotations

import json
from typing import cast
from unittest.mock import MagicMock

import ops
import pytest
from lightkube.resources.admissionregistration_v1 import (
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
)
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding
from tests.juju.kit import APP, MODEL, CharmKit
from tests.unit.charm.cluster_objects import OURS

import charm
from aitenant import contract
from aitenant_charm.cluster_manifests import CHARM_LABELS, CONTROLLER_CLUSTER_ROLE, load_crds
from aitenant_charm.workload import SERVICE

SHIPPED_CRDS = load_crds()


def test_client_uses_the_charm_field_manager(ready: CharmKit):
    # GIVEN a reconciled deployment
    # WHEN we look at how the lightkube Client was built
    client_class = cast(MagicMock, charm.Client)
    # THEN server-side apply writes as `aitenant-k8s`
    assert client_class.call_args.kwargs == {"field_manager": "aitenant-k8s"}


def test_leader_applies_the_shipped_crds_with_force(ready: CharmKit):
    # GIVEN the CRDs in the aitenant package
    assert SHIPPED_CRDS, "aitenant/manifests/crds is empty"
    # WHEN the leader reconciles
    # THEN every shipped CRD was server-side applied, taking ownership of conflicting fields
    applied = {crd.metadata.name for crd in ready.applied(CustomResourceDefinition) if crd.metadata}
    assert applied == {crd.metadata.name for crd in SHIPPED_CRDS if crd.metadata}
    assert "aitenants.maas.opendatahub.io" in applied
    for call in ready.kube.apply.call_args_list:
        assert call.kwargs.get("force") is True


def test_controller_cluster_role_is_bound_to_the_app_service_account(ready: CharmKit):
    # GIVEN a reconciled leader
    # WHEN we look at the RBAC objects applied
    roles = {role.metadata.name for role in ready.applied(ClusterRole) if role.metadata}
    bindings = ready.applied(ClusterRoleBinding)
    assert {b.metadata.name for b in bindings if b.metadata} == {OURS}
    binding = bindings[-1]
    # THEN the controller's ClusterRole is applied and bound to `<app>` in the model namespace
    assert CONTROLLER_CLUSTER_ROLE in roles
    assert binding.roleRef.name == CONTROLLER_CLUSTER_ROLE
    assert binding.roleRef.kind == "ClusterRole"
    assert binding.subjects
    [subject] = binding.subjects
    assert (subject.kind, subject.name, subject.namespace) == ("ServiceAccount", APP, MODEL)


def test_cluster_role_binding_writes_are_limited_to_the_app_service_account_s_maas_api_ones(
    ready: CharmKit,
):
    # GIVEN a reconciled leader
    # WHEN we look at the admission policy applied
    policy = ready.applied(ValidatingAdmissionPolicy)[-1]
    binding = ready.applied(ValidatingAdmissionPolicyBinding)[-1]
    # THEN it is named like our other cluster-scoped objects, matches the app's service account
    # only, and the binding denies what it refuses
    assert policy.metadata
    assert policy.metadata.name == OURS
    assert policy.metadata.labels == CHARM_LABELS
    assert policy.spec
    [condition] = policy.spec.matchConditions or []
    assert f'"system:serviceaccount:{MODEL}:{APP}"' in condition.expression
    assert binding.spec
    assert binding.spec.policyName == OURS
    assert binding.spec.validationActions == ["Deny"]


def test_non_leader_applies_nothing(kit: CharmKit):
    # GIVEN a non-leader unit
    kit.set_leader(False)
    # WHEN it reconciles
    kit.make_ready()
    # THEN cluster objects are the leader's job
    kit.kube.apply.assert_not_called()


@pytest.mark.parametrize("event", ["upgrade_charm", "config_changed", "update_status"])
def test_crds_reapplied_never_deleted_on_other_events(ready: CharmKit, event: str):
    # GIVEN a reconciled leader
    ready.kube.apply.reset_mock()
    # WHEN another lifecycle event arrives
    ready.emit(event)
    # THEN the CRDs are applied again (idempotent) and nothing is deleted
    assert len(ready.applied(CustomResourceDefinition)) == len(SHIPPED_CRDS)
    ready.kube.delete.assert_not_called()


def _has_cel(crds: list[CustomResourceDefinition]) -> bool:
    return "x-kubernetes-validations" in json.dumps([crd.to_dict() for crd in crds])


def test_crds_keep_their_cel_rules(kit: CharmKit):
    # GIVEN a supported API server (1.37, the fake's default)
    # WHEN the leader reconciles
    kit.make_ready()
    # THEN the CRDs are applied with their CEL rules (every supported server evaluates them)
    assert _has_cel(kit.applied(CustomResourceDefinition))


def test_an_api_server_older_than_1_32_blocks_and_nothing_is_written(kit: CharmKit):
    # GIVEN a 1.31 API server
    kit.private.version.return_value = {"major": "1", "minor": "31", "gitVersion": "v1.31.9"}
    # WHEN the leader reconciles with everything related
    kit.make_ready()
    # THEN it is blocked with the one line naming both versions
    assert kit.status() == ops.BlockedStatus(
        "the API server runs Kubernetes v1.31.9; aitenant-k8s needs 1.32 or later"
    )
    # AND it wrote nothing to the cluster and planned no controller
    kit.kube.apply.assert_not_called()
    kit.kube.patch.assert_not_called()
    kit.kube.delete.assert_not_called()
    assert SERVICE not in kit.plan().services


def test_everything_the_charm_writes_is_kept_by_juju(ready: CharmKit):
    # GIVEN a healthy deployment that reconciled (and created the AITenant namespace)
    # THEN every object it applied or created carries the label Juju's model webhook skips,
    # so `juju remove-application` leaves it to the charm (README.md, "Removing the charm")
    written = [
        call.args[0]
        for call in [*ready.kube.apply.call_args_list, *ready.kube.create.call_args_list]
    ]
    kinds = {type(obj).__name__ for obj in written}
    assert {"CustomResourceDefinition", "ClusterRole", "Namespace", "Role"} <= kinds
    unlabelled = [
        f"{type(obj).__name__} {obj.metadata.name}"
        for obj in written
        if not (obj.metadata.labels or {}).items() >= contract.KEPT_BY_JUJU_LABELS.items()
    ]
    assert unlabelled == []
