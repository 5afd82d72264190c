"""The status as Pebble reports the controller: planned, answering /readyz, running or not.

Hooks driven through ``ops.testing`` (``tests.juju.model.Deployment``) on a unit whose Pebble
state each test sets: the rock's own service is not the charm's, Active waits for /readyz, a
controller in error or inactive is not Active, and prepare-removal or a second deployment stops
a controller that is not running cleanly.
"""

from __future__ import annotations

import dataclasses

import ops
import pytest
from tests.juju.model import Deployment, FakeCluster
from tests.unit.charm.juju_hooks import ACTIVE_LEADER, deployed

import charm
from aitenant_charm.workload import SERVICE


def test_the_rocks_own_service_is_not_taken_for_the_charms():
    # GIVEN a unit whose container holds only the rock's layer (the charm planned nothing)
    cluster = FakeCluster()
    deployment = Deployment(cluster)
    deployment.relate_gateway()
    deployment.relate_maas_api()
    assert SERVICE in deployment.units[0].container.plan.services
    # WHEN a hook the charm does not reconcile on runs, once the CA and certificate exist
    deployment.run(0, lambda ctx, s: ctx.on.leader_elected())
    container = deployment.units[0].container
    deployment.units[0].state = dataclasses.replace(
        deployment.units[0].state,
        containers={
            dataclasses.replace(
                container, layers={"000-rock": container.layers["000-rock"]}, check_infos=set()
            )
        },
    )
    status = deployment.run(0, lambda ctx, s: ctx.on.install())
    # THEN the status says the controller is not planned yet (the rock's plan is not ours)
    assert status == ops.WaitingStatus("waiting for the controller service to be planned")


def test_active_only_once_the_controller_answers_readyz():
    # GIVEN a unit whose controller was just planned and does not answer /readyz yet,
    # while Pebble's ready check says `up` with no success (it has not run yet)
    cluster = FakeCluster()
    deployment = Deployment(cluster)
    deployment.relate_gateway()
    deployment.relate_maas_api()
    deployment.units[0].workload.ready = False
    # WHEN the charm plans the controller
    status = deployment.run(0, lambda ctx, s: ctx.on.config_changed())
    # THEN it is not Active
    assert status == ops.WaitingStatus("controller starting: /readyz not answering yet")
    # AND once the controller answers, the next hook says Active
    deployment.units[0].workload.ready = True
    assert deployment.run(0, lambda ctx, s: ctx.on.update_status()) == ACTIVE_LEADER


def test_prepare_removal_stops_a_controller_that_is_not_running_cleanly():
    # GIVEN a controller that keeps crashing: Pebble reports it in error (ops.testing has no
    # "backoff" state; tests/e2e/test_charm_pebble.py stops one in backoff under real Pebble)
    current = ops.pebble.ServiceStatus.ERROR
    cluster = FakeCluster()
    deployment = deployed(cluster)
    unit = deployment.units[0]
    container = dataclasses.replace(unit.container, service_statuses={SERVICE: current})
    unit.state = dataclasses.replace(unit.state, containers={container})
    # WHEN the operator runs prepare-removal
    deployment.action(0, charm.PREPARE_REMOVAL_ACTION)
    # THEN the service is stopped, so Pebble does not start it again
    assert unit.container.service_statuses[SERVICE] == ops.pebble.ServiceStatus.INACTIVE


def test_a_second_deployment_stops_its_controller():
    # GIVEN model `first` runs the charm and the second deployment's controller runs (error)
    cluster = FakeCluster()
    deployed(cluster, model="first")
    second = Deployment(cluster, model="second")
    unit = second.units[0]
    backoff = {SERVICE: ops.pebble.ServiceStatus.ERROR}
    unit.state = dataclasses.replace(
        unit.state, containers={dataclasses.replace(unit.container, service_statuses=backoff)}
    )
    # WHEN the second deployment reconciles
    second.run(0, lambda ctx, s: ctx.on.config_changed())
    # THEN its controller is stopped
    assert unit.container.service_statuses[SERVICE] == ops.pebble.ServiceStatus.INACTIVE


@pytest.mark.parametrize(
    ("current", "message"),
    [
        (ops.pebble.ServiceStatus.ERROR, "controller service error"),
        (ops.pebble.ServiceStatus.INACTIVE, "controller service inactive"),
    ],
)
def test_a_controller_not_running_is_not_active(current: ops.pebble.ServiceStatus, message: str):
    # GIVEN a planned controller that Pebble reports as not running
    cluster = FakeCluster()
    deployment = deployed(cluster)
    unit = deployment.units[0]
    container = dataclasses.replace(unit.container, service_statuses={SERVICE: current})
    unit.state = dataclasses.replace(unit.state, containers={container})
    # WHEN a hook the charm does not reconcile on runs
    status = deployment.run(0, lambda ctx, s: ctx.on.install())
    # THEN the status says what Pebble says
    assert status == ops.WaitingStatus(message)
