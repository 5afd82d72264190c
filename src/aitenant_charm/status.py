"""The rungs of the status ladder, in the order ``charm.py``'s collect-status climbs them.

Each rung returns the status to show when its fact is missing, or None to go on; the first
rung that returns wins, so the order is the priority. Every rung reads a fact available in any
hook (the cluster, stored state, config, relation data, secrets, the workload container),
never what another handler of the same dispatch may have set. The first rung,
``cluster_hold``, is also the reconcile's guard, so the status and what the charm writes
never disagree about the cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import ops
from pydantic import ValidationError

from aitenant_charm import pebble_layer
from aitenant_charm.api_server_reads import ClusterFacts
from aitenant_charm.config import CharmConfig, describe_error
from aitenant_charm.flags import maas_api_refusal
from charms.aitenant_k8s.v0.maas_api import DatabagError, MaasApiRequirer


@dataclass(frozen=True)
class ClusterHold:
    """Why the charm leaves the cluster alone for now: the status to show, the line the
    reconcile logs (at ``level``), and whether the controller must stay stopped."""

    status: ops.StatusBase
    log: str
    level: int = logging.INFO
    stops_controller: bool = False


def cluster_hold(facts: ClusterFacts, *, app: str, removal_prepared: bool) -> ClusterHold | None:
    """Trust, the API server's version, removal prepared, another deployment on the cluster;
    None when the charm may write. The last three keep the controller stopped."""
    if not facts.access.trusted:
        log = f"Kubernetes API not usable yet: {facts.access.error}"
        if not facts.access.error:
            return ClusterHold(ops.BlockedStatus(f"run `juju trust {app} --scope=cluster`"), log)
        status = ops.WaitingStatus(f"Kubernetes API not reachable: {facts.access.error}")
        return ClusterHold(status, log)
    if facts.error:
        status = ops.WaitingStatus(f"Kubernetes API: {facts.error}")
        return ClusterHold(status, f"cannot read the cluster yet: {facts.error}")
    if facts.unsupported:
        return ClusterHold(
            ops.BlockedStatus(facts.unsupported),
            f"{facts.unsupported}; nothing applied",
            logging.WARNING,
            stops_controller=True,
        )
    if removal_prepared:
        return ClusterHold(
            ops.BlockedStatus(
                "prepared for removal: controller stopped, finalizers released; "
                f"run `juju remove-application {app}`"
            ),
            "prepared for removal: the controller stays stopped",
            stops_controller=True,
        )
    if facts.other is not None:
        return ClusterHold(
            ops.BlockedStatus(
                f"model {facts.other.model!r} already runs this charm on the cluster "
                f"(ClusterRoleBinding {facts.other.binding}); one deployment per cluster"
            ),
            f"model {facts.other.model} already runs this charm on the cluster",
            logging.WARNING,
            stops_controller=True,
        )
    return None


def invalid_config(exc: ValidationError) -> ops.StatusBase:
    """The first invalid option, named as `juju config` names it."""
    option, reason = describe_error(exc)
    return ops.BlockedStatus(f"invalid config {option}: {reason}")


def of_gateway(missing: list[str], *, relation: str) -> ops.StatusBase | None:
    """The gateway options still unknown, from neither config nor the ``relation``."""
    if not missing:
        return None
    options = " and ".join(f"`{option}`" for option in missing)
    return ops.BlockedStatus(f"gateway unknown: set {options} or integrate `{relation}`")


def of_maas_api(
    maas_api: MaasApiRequirer, config: CharmConfig, *, relation: str
) -> ops.StatusBase | None:
    """The `maas-api` relation: present, published, valid, and safe to use."""
    if not maas_api.is_related:
        return ops.BlockedStatus(f"missing relation: integrate `{relation}`")
    try:
        data = maas_api.read()
    except DatabagError as exc:
        return ops.BlockedStatus(f"invalid `{relation}` relation data: {exc}")
    if data is None:
        return ops.WaitingStatus(f"waiting for `{relation}` relation data")
    refusal = maas_api_refusal(config, data)
    if refusal is not None:
        return ops.BlockedStatus(f"refused `{relation}` relation data: {refusal}")
    return None


def of_certificates(
    *,
    has_ca: bool,
    webhook_tls: Callable[[], object | None],
    certificates_relation: str | None,
) -> ops.StatusBase | None:
    """The internal CA, then the webhook certificate ``webhook_tls`` reads (from
    ``certificates_relation`` when the unit has that relation, else the leader's fallback)."""
    if not has_ca:
        return ops.WaitingStatus("waiting for the leader to create the internal CA")
    if webhook_tls() is not None:
        return None
    if certificates_relation is not None:
        return ops.WaitingStatus(
            f"waiting for the webhook certificate from `{certificates_relation}`"
        )
    return ops.WaitingStatus("waiting for the leader to issue the webhook certificate")


def of_controller(
    container: ops.Container, layer: ops.pebble.Layer | None, *, health_port: int
) -> ops.StatusBase | None:
    """The workload rungs: planned as ``layer`` (None while its inputs are missing), running,
    and answering /readyz right now.

    The rock's own layer already defines the service before the charm plans anything, so
    "planned" means "as the charm would plan it now". Pebble's ready check says `up` with no
    success before its first run (one period after each replan) and does not see a crash
    that Pebble restarts within a period, so Active needs the controller to answer /readyz
    to the charm's own probe (the pod shares one network namespace).
    """
    if layer is None or not pebble_layer.planned_as(container.get_plan(), layer):
        return ops.WaitingStatus("waiting for the controller service to be planned")
    current = pebble_layer.service_status(container)
    if current != "active":
        return ops.WaitingStatus(f"controller service {current or 'absent'}")
    if pebble_layer.ready_check_down(container):
        return ops.WaitingStatus("controller not ready: /readyz failing")
    if not pebble_layer.controller_ready("127.0.0.1", health_port):
        return ops.WaitingStatus("controller starting: /readyz not answering yet")
    return None


def active(*, leader: bool, tenants: int | None) -> ops.StatusBase:
    """Active: standby on a non-leader; the leader counts the tenants when it can."""
    if not leader:
        return ops.ActiveStatus("standby (leader election is the controller's)")
    if tenants is None:
        return ops.ActiveStatus()
    return ops.ActiveStatus(f"{tenants} tenant{'' if tenants == 1 else 's'}")
