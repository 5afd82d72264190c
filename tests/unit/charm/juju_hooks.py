"""Every hook Juju may send a unit, and a runner that checks the status after each.

Shared by the charm's hook tests (test_charm_hooks.py, test_charm_workload_status.py,
test_charm_several_units.py): ``deployed`` builds a related deployment on a ``FakeCluster``
through ``tests.juju.model.Deployment`` (one ``Context.run`` per hook, so no attribute survives
from one hook to the next); ``every_hook`` lists the hooks with how each changes the facts and
the status; ``run_every_hook`` runs them all on each unit and names those whose status is not
what the facts say.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import ops
from ops import testing
from tests.juju.model import Deployment, FakeCluster, SharedRelation, Unit

import charm
from aitenant_charm.internal_ca import INTERNAL_CA_LABEL
from aitenant_charm.workload import CONTAINER

Event = Callable[[testing.Context[Any], testing.State], Any]

ACTIVE_LEADER = ops.ActiveStatus("0 tenants")
ACTIVE_STANDBY = ops.ActiveStatus("standby (leader election is the controller's)")


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
