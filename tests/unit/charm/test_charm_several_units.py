"""Several units of one deployment: the leader's CA, standby units, a new leader.

Hooks driven through ``ops.testing`` (``tests.juju.model.Deployment``) on three units: the
non-leaders wait for the leader's internal CA and then run the controller as standby, a new
leader keeps the same CA, and prepare-removal refuses while there is more than one unit.
"""

from __future__ import annotations

import ops
import pytest
from ops import testing
from tests.juju.model import Deployment, FakeCluster
from tests.unit.charm.juju_hooks import ACTIVE_LEADER, ACTIVE_STANDBY, deployed

import charm
from aitenant_charm.workload import SERVICE


def test_non_leaders_wait_for_the_leaders_ca_then_become_active():
    # GIVEN three units whose non-leaders run their first hooks before the leader's
    cluster = FakeCluster()
    deployment = Deployment(cluster, units=3)
    deployment.relate_gateway()
    deployment.relate_maas_api()
    # WHEN a non-leader installs before the leader created the CA
    status = deployment.run(1, lambda ctx, s: ctx.on.install())
    # THEN it waits for the leader, and created nothing itself
    assert status == ops.WaitingStatus("waiting for the leader to create the internal CA")
    assert not deployment.secrets
    # WHEN the leader reconciles, and the non-leaders get their next hook
    assert deployment.run(0, lambda ctx, s: ctx.on.config_changed()) == ACTIVE_LEADER
    for unit in (1, 2):
        # THEN they run the controller too, as standby
        assert deployment.run(unit, lambda ctx, s: ctx.on.config_changed()) == ACTIVE_STANDBY
        assert deployment.units[unit].container.service_statuses[SERVICE] == (
            ops.pebble.ServiceStatus.ACTIVE
        )


def test_a_new_leader_takes_over_with_the_same_ca():
    # GIVEN three healthy units
    cluster = FakeCluster()
    deployment = deployed(cluster, units=3)
    ca = {s.id: s.tracked_content for s in deployment.secrets.values()}
    # WHEN unit 1 becomes the leader
    deployment.leader = 1
    statuses = [deployment.run(1, lambda ctx, s: ctx.on.leader_elected())]
    statuses += [deployment.run(u, lambda ctx, s: ctx.on.update_status()) for u in (0, 2)]
    # THEN it reports as the leader, the others as standby, and no CA was replaced
    assert statuses == [ACTIVE_LEADER, ACTIVE_STANDBY, ACTIVE_STANDBY]
    assert {s.id: s.tracked_content for s in deployment.secrets.values()} == ca


def test_prepare_removal_refuses_with_three_units():
    # GIVEN three units
    cluster = FakeCluster()
    deployment = deployed(cluster, units=3)
    # WHEN the operator runs prepare-removal on the leader
    with pytest.raises(testing.ActionFailed, match="scale to one unit first"):
        deployment.action(0, charm.PREPARE_REMOVAL_ACTION)
    # THEN nothing changed: the controller still runs, the status is still Active
    assert deployment.run(0, lambda ctx, s: ctx.on.update_status()) == ACTIVE_LEADER
