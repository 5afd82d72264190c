"""State transitions as Juju runs the charm: a fresh charm per hook, the same cluster.

Every hook Juju sends ends with collect-status, also the hooks the charm does not observe.
Each test here drives real hooks through ``ops.testing`` (``tests.juju.model.Deployment``: one
``Context.run`` per hook, so no attribute survives from one hook to the next) and checks that
the status after each is what the facts say, whichever hook came last: a healthy deployment, a
second deployment on the same cluster, an API server too old, missing trust, a failed apply,
removal prepared. The hook table and its runner are in juju_hooks.py.
"""

from __future__ import annotations

import ops
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding
from tests.juju.kit import api_error
from tests.juju.model import APP, Deployment, FakeCluster, Unit
from tests.unit.charm.juju_hooks import ACTIVE_LEADER, ACTIVE_STANDBY, deployed, run_every_hook

import charm
from aitenant_charm.workload import LAYER, SERVICE

OLD_KUBERNETES = "the API server runs Kubernetes v1.31.4; aitenant-k8s needs 1.32 or later"


def test_every_hook_on_three_healthy_units_reports_what_the_facts_say():
    # GIVEN three units of a healthy deployment
    cluster = FakeCluster()
    deployment = deployed(cluster, units=3)

    def expected(unit: Unit) -> ops.StatusBase:
        return ACTIVE_LEADER if unit.id == deployment.leader else ACTIVE_STANDBY

    # WHEN every hook Juju sends runs on every unit, each with a fresh charm
    # THEN each status is what that hook's facts say
    assert run_every_hook(deployment, expected) == []


def test_every_hook_of_a_second_deployment_on_the_same_cluster_blocks():
    # GIVEN model `first` runs the charm, and a second deployment comes to the same cluster
    cluster = FakeCluster()
    deployed(cluster, model="first")
    second = deployed(cluster, model="second")
    blocked = ops.BlockedStatus(
        "model 'first' already runs this charm on the cluster (ClusterRoleBinding "
        f"aitenant.first.{APP}); one deployment per cluster"
    )
    # WHEN any hook runs on the second deployment
    # THEN it says the first one serves the cluster, whichever hook it was
    assert run_every_hook(second, lambda u: blocked, facts_dominate=True) == []


def test_second_deployment_says_so_after_update_status_and_on_the_next_install():
    # GIVEN model `first` runs the charm
    cluster = FakeCluster()
    deployed(cluster, model="first")
    second = Deployment(cluster, model="second")
    second.relate_gateway()
    second.relate_maas_api()
    blocked = ops.BlockedStatus(
        "model 'first' already runs this charm on the cluster (ClusterRoleBinding "
        f"aitenant.first.{APP}); one deployment per cluster"
    )
    # WHEN the second deployment's unit gets update-status, then install (a fresh process each)
    after_update = second.run(0, lambda ctx, s: ctx.on.update_status())
    after_install = second.run(0, lambda ctx, s: ctx.on.install())
    # THEN both say the cluster is taken, and the second deployment bound nothing
    assert after_update == blocked
    assert after_install == blocked
    bindings = {b.metadata.name for b in cluster.of_kind(ClusterRoleBinding)}
    assert bindings == {f"aitenant.first.{APP}"}


def test_an_api_server_older_than_1_32_blocks_on_every_hook_and_nothing_is_written():
    # GIVEN an API server running Kubernetes 1.31
    cluster = FakeCluster()
    cluster.version = {"major": "1", "minor": "31", "gitVersion": "v1.31.4"}
    # WHEN a deployment goes through install to pebble-ready, then every hook
    deployment = deployed(cluster)
    wrong = run_every_hook(
        deployment, lambda u: ops.BlockedStatus(OLD_KUBERNETES), facts_dominate=True
    )
    # THEN it is blocked with the one line naming both versions, after every hook
    assert wrong == []
    # AND it wrote nothing to the cluster and never planned the controller
    assert cluster.writes == []
    assert LAYER not in deployment.units[0].container.layers


def test_an_upgraded_api_server_lets_the_same_deployment_proceed():
    # GIVEN a deployment blocked on a 1.31 API server
    cluster = FakeCluster()
    cluster.version = {"major": "1", "minor": "31", "gitVersion": "v1.31.4"}
    deployment = deployed(cluster)
    # WHEN the API server is upgraded to 1.32 and the next update-status comes
    cluster.version = {"major": "1", "minor": "32", "gitVersion": "v1.32.0"}
    status = deployment.run(0, lambda ctx, s: ctx.on.update_status())
    # THEN the charm applies its objects and the controller becomes active
    assert status == ACTIVE_LEADER
    assert cluster.of_kind(ValidatingWebhookConfiguration)


def test_missing_trust_blocks_on_every_hook():
    # GIVEN an application without `juju trust`
    cluster = FakeCluster()
    cluster.untrusted.add("maas")
    deployment = deployed(cluster)
    trust = ops.BlockedStatus(f"run `juju trust {APP} --scope=cluster`")
    # WHEN any hook runs, THEN it asks for the command, and nothing was written
    assert run_every_hook(deployment, lambda u: trust, facts_dominate=True) == []
    assert cluster.writes == []


def test_a_failed_apply_is_reported_by_every_later_hook_until_one_succeeds():
    # GIVEN a healthy leader whose API server starts refusing writes
    cluster = FakeCluster()
    deployment = deployed(cluster)
    cluster.apply_error = api_error(429, "too many requests")
    # WHEN config changes (the leader reconciles and fails), then every other hook
    status = deployment.run(0, lambda ctx, s: ctx.on.config_changed())
    waiting = ops.WaitingStatus("cluster objects not applied: 429 too many requests")
    assert status == waiting
    # THEN every hook says so, observed by the charm or not
    assert run_every_hook(deployment, lambda u: waiting, facts_dominate=True) == []
    # AND once writes succeed again, the next reconcile clears it
    cluster.apply_error = None
    assert deployment.run(0, lambda ctx, s: ctx.on.update_status()) == ACTIVE_LEADER
    assert deployment.run(0, lambda ctx, s: ctx.on.install()) == ACTIVE_LEADER


def test_prepared_for_removal_is_reported_by_every_hook():
    # GIVEN a single-unit deployment prepared for removal
    cluster = FakeCluster()
    deployment = deployed(cluster)
    deployment.action(0, charm.PREPARE_REMOVAL_ACTION)
    blocked = ops.BlockedStatus(
        "prepared for removal: controller stopped, finalizers released; "
        f"run `juju remove-application {APP}`"
    )
    # WHEN any hook runs, THEN the status says what was done and what to run
    assert run_every_hook(deployment, lambda u: blocked, facts_dominate=True) == []
    # AND the controller stayed stopped throughout
    current = deployment.units[0].container.service_statuses.get(SERVICE)
    assert current == ops.pebble.ServiceStatus.INACTIVE
