"""State transitions as Juju runs the charm: a fresh charm per hook, the same cluster.

Every hook Juju sends ends with collect-status, also the hooks the charm does not observe.
Each test here drives real hooks through ``ops.testing`` (``tests.juju.model.Deployment``: one
``Context.run`` per hook, so no attribute survives from one hook to the next) and checks that
the status after each is what the facts say, whichever hook came last.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import ops
import pytest
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding
from ops import testing
from tests.juju.kit import api_error
from tests.juju.model import APP, Deployment, FakeCluster, SharedRelation, Unit

import charm
from aitenant_charm.internal_ca import INTERNAL_CA_LABEL
from aitenant_charm.workload import CONTAINER, LAYER, SERVICE

Event = Callable[[testing.Context[Any], testing.State], Any]

ACTIVE_LEADER = ops.ActiveStatus("0 tenants")
ACTIVE_STANDBY = ops.ActiveStatus("standby (leader election is the controller's)")
OLD_KUBERNETES = "the API server runs Kubernetes v1.31.4; aitenant-k8s needs 1.32 or later"


def deployed(cluster: FakeCluster, model: str = "maas", units: int = 1) -> Deployment:
    """A deployment with the gateway, maas-api and COS relations, settled hook by hook."""
    deployment = Deployment(cluster, model=model, units=units)
    deployment.relate_gateway()
    deployment.relate_maas_api()
    deployment.relate_cos()
    deployment.settle()
    return deployment


# --- Every hook -----------------------------------------------------------------------------


@dataclasses.dataclass
class Hook:
    """One hook Juju may send to a unit, and how the facts it changes change the status."""

    name: str
    event: Callable[[Deployment, Unit], Event]
    # The status this hook's facts call for, when it differs from the deployment's own.
    expect: Callable[[Deployment, Unit], ops.StatusBase | None] = lambda d, u: None
    # Juju's side of the hook: what changes before it runs, and after it ran.
    before: Callable[[Deployment, Unit], Any] = lambda d, u: None
    after: Callable[[Deployment, Unit], Any] = lambda d, u: None
    leader_only: bool = False
    # Whether Juju could send it in this deployment's situation (check events need planned
    # checks, secret events an existing secret).
    applies: Callable[[Deployment, Unit], bool] = lambda d, u: True


def _container(state: testing.State) -> testing.Container:
    return state.get_container(CONTAINER)


def _relation(d: Deployment, endpoint: str) -> SharedRelation:
    return next(r for r in d.relations.values() if r.template.endpoint == endpoint)


def _remote(d: Deployment, unit: Unit, endpoint: str) -> int:
    """A remote unit of the relation: another unit of ours for the peer relation."""
    if isinstance(_relation(d, endpoint).template, testing.PeerRelation):
        return next(u.id for u in d.units if u is not unit)
    return 0


def _relation_hooks(endpoint: str, **broken: Any) -> list[Hook]:
    def rel(d: Deployment, state: testing.State) -> testing.RelationBase:
        return state.get_relation(_relation(d, endpoint).id)

    def remote(d: Deployment, u: Unit) -> dict[str, int]:
        return {"remote_unit": _remote(d, u, endpoint)}

    hooks = [
        Hook(
            f"{endpoint}-relation-created",
            lambda d, u: lambda ctx, s: ctx.on.relation_created(rel(d, s)),
        ),
        Hook(
            f"{endpoint}-relation-joined",
            lambda d, u: lambda ctx, s: ctx.on.relation_joined(rel(d, s), **remote(d, u)),
        ),
        Hook(
            f"{endpoint}-relation-changed",
            lambda d, u: lambda ctx, s: ctx.on.relation_changed(rel(d, s), **remote(d, u)),
        ),
        Hook(
            f"{endpoint}-relation-departed",
            lambda d, u: (
                lambda ctx, s: ctx.on.relation_departed(
                    rel(d, s), departing_unit=remote(d, u)["remote_unit"], **remote(d, u)
                )
            ),
        ),
    ]
    if broken.get("skip"):
        return hooks
    return [
        *hooks,
        Hook(
            f"{endpoint}-relation-broken",
            lambda d, u: lambda ctx, s: ctx.on.relation_broken(rel(d, s)),
            expect=broken.get("expect", lambda d, u: None),
            # Juju removes the relation once every unit ran relation-broken; put it back
            # for the next hook (each hook starts from the deployment's facts).
            after=lambda d, u: None,
        ),
    ]


def _ca_secret(d: Deployment, state: testing.State) -> testing.Secret:
    return next(s for s in state.secrets if s.label == INTERNAL_CA_LABEL)


def _has_checks(d: Deployment, u: Unit) -> bool:
    return "ready" in u.container.plan.checks


def _has_ca(d: Deployment, u: Unit) -> bool:
    return any(s.label == INTERNAL_CA_LABEL for s in d.secrets.values())


def _foreign_secret(state: testing.State) -> testing.Secret:
    return next(s for s in state.secrets if s.label == "shared-by-another-app")


def _share_a_secret(d: Deployment, u: Unit) -> None:
    secret = testing.Secret({"token": "t1"}, latest_content={"token": "t2"})
    if not any(s.label == "shared-by-another-app" for s in d.secrets.values()):
        shared = dataclasses.replace(secret, label="shared-by-another-app")
        d.secrets[shared.id] = shared


def _with_ready_check(d: Deployment, u: Unit, status: ops.pebble.CheckStatus) -> None:
    """Pebble's ready check as the real Pebble reports it after three failures (or back up)."""
    failures = 3 if status == ops.pebble.CheckStatus.DOWN else 0
    info = testing.CheckInfo(
        "ready",
        level=ops.pebble.CheckLevel.READY,
        status=status,
        successes=0 if failures else 5,
        failures=failures,
        threshold=3,
    )
    u.workload.ready = status == ops.pebble.CheckStatus.UP
    container = dataclasses.replace(_container(u.state), check_infos={info})
    u.state = dataclasses.replace(u.state, containers={container})


def _certificates_hooks() -> list[Hook]:
    """The `certificates` relation, added for these hooks, whose provider has not answered."""
    waiting = ops.WaitingStatus("waiting for the webhook certificate from `certificates`")

    def add(d: Deployment, u: Unit) -> None:
        if not any(
            r.template.endpoint == charm.CERTIFICATES_RELATION for r in d.relations.values()
        ):
            d.relate(charm.CERTIFICATES_RELATION, "self-signed-certificates")

    def drop(d: Deployment, u: Unit) -> None:
        d.unrelate(_relation(d, charm.CERTIFICATES_RELATION))

    return [
        dataclasses.replace(
            hook,
            before=add,
            expect=(lambda d, u: None) if hook.name.endswith("broken") else (lambda d, u: waiting),
            after=drop if hook.name.endswith("broken") else (lambda d, u: None),
        )
        for hook in _relation_hooks(charm.CERTIFICATES_RELATION)
    ]


def every_hook(deployment: Deployment) -> list[Hook]:
    hooks = [
        Hook("install", lambda d, u: lambda ctx, s: ctx.on.install()),
        Hook(
            "leader-elected", lambda d, u: lambda ctx, s: ctx.on.leader_elected(), leader_only=True
        ),
        Hook("config-changed", lambda d, u: lambda ctx, s: ctx.on.config_changed()),
        Hook("start", lambda d, u: lambda ctx, s: ctx.on.start()),
        Hook("upgrade-charm", lambda d, u: lambda ctx, s: ctx.on.upgrade_charm()),
        Hook("update-status", lambda d, u: lambda ctx, s: ctx.on.update_status()),
        Hook(
            "pebble-ready",
            lambda d, u: lambda ctx, s: ctx.on.pebble_ready(_container(s)),
        ),
        Hook(
            "pebble-check-failed",
            lambda d, u: (
                lambda ctx, s: ctx.on.pebble_check_failed(
                    _container(s), _container(s).get_check_info("ready")
                )
            ),
            before=lambda d, u: _with_ready_check(d, u, ops.pebble.CheckStatus.DOWN),
            expect=lambda d, u: ops.WaitingStatus("controller not ready: /readyz failing"),
            applies=_has_checks,
        ),
        Hook(
            "pebble-check-recovered",
            lambda d, u: (
                lambda ctx, s: ctx.on.pebble_check_recovered(
                    _container(s), _container(s).get_check_info("ready")
                )
            ),
            before=lambda d, u: _with_ready_check(d, u, ops.pebble.CheckStatus.UP),
            applies=_has_checks,
        ),
        Hook(
            # Juju sends secret-changed to consumers only: a secret another app shared.
            "secret-changed",
            lambda d, u: lambda ctx, s: ctx.on.secret_changed(_foreign_secret(s)),
            before=_share_a_secret,
        ),
        Hook(
            "secret-expired",
            lambda d, u: lambda ctx, s: ctx.on.secret_expired(_ca_secret(d, s), revision=1),
            leader_only=True,
            applies=_has_ca,
        ),
        Hook(
            "secret-rotate",
            lambda d, u: lambda ctx, s: ctx.on.secret_rotate(_ca_secret(d, s)),
            leader_only=True,
            applies=_has_ca,
        ),
        *_relation_hooks(
            charm.GATEWAY_RELATION,
            expect=lambda d, u: ops.BlockedStatus(
                "gateway unknown: set `gateway-namespace` and `gateway-name` or integrate `gateway`"
            ),
        ),
        *_relation_hooks(
            charm.MAAS_API_RELATION,
            expect=lambda d, u: ops.BlockedStatus("missing relation: integrate `maas-api`"),
        ),
        *_relation_hooks(charm.METRICS_RELATION),
        *_relation_hooks(charm.DASHBOARD_RELATION),
        *_relation_hooks(charm.LOGGING_RELATION),
        *_certificates_hooks(),
    ]
    if deployment.peers is not None:
        # A peer relation is never broken while the unit lives, and has remote units only
        # with several units.
        hooks += [
            hook
            if hook.name.endswith("created")
            else dataclasses.replace(hook, applies=lambda d, u: len(d.units) > 1)
            for hook in _relation_hooks(deployment.peers.template.endpoint, skip=True)
        ]
    return [
        *hooks,
        Hook("stop", lambda d, u: lambda ctx, s: ctx.on.stop()),
        Hook("remove", lambda d, u: lambda ctx, s: ctx.on.remove()),
    ]


def run_every_hook(
    deployment: Deployment,
    expected: Callable[[Unit], ops.StatusBase],
    units: list[Unit] | None = None,
    *,
    facts_dominate: bool = False,
) -> list[str]:
    """Run every hook on each unit; the hooks whose status is not what the facts say.

    ``facts_dominate``: the deployment's situation outranks whatever a hook changes (trust,
    version, another deployment, removal, a failed apply), so no hook may move the status.
    """
    wrong: list[str] = []
    for unit in units or deployment.units:
        for hook in every_hook(deployment):
            if hook.leader_only and unit.id != deployment.leader:
                continue
            if not hook.applies(deployment, unit):
                continue
            hook.before(deployment, unit)
            status = deployment.run(unit, hook.event(deployment, unit))
            want = None if facts_dominate else hook.expect(deployment, unit)
            want = want or expected(unit)
            if status != want:
                wrong.append(f"{unit.name} {hook.name}: {status!r}, expected {want!r}")
            hook.after(deployment, unit)
            # Back to the deployment's facts for the next hook.
            unit.workload.ready = True
            container = dataclasses.replace(_container(unit.state), check_infos=set())
            unit.state = dataclasses.replace(unit.state, containers={container})
    return wrong


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


# --- The workload as the real Pebble runs it ------------------------------------------------


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


# --- Several units --------------------------------------------------------------------------


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
