"""The controller under Pebble: its layer and checks, the replan, the stop, and /readyz.

``construct_layer`` is pure. The real Pebble differs from what a charm may assume in three
ways this module accounts for (tests/e2e/test_charm_pebble.py shows each one):

- the rock's own layer defines the service before the charm plans anything, so "planned"
  means "planned as the charm would plan it now" (``planned_as``);
- a service in ``backoff`` (between a crash and Pebble's restart) is not "running", yet
  Pebble starts it again a moment later, so ``stop_controller`` stops anything not inactive;
- a check reports ``up`` before its first run, one period after each replan, so readiness
  is the controller answering ``/readyz`` to the charm's own probe (``controller_ready``).
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Mapping
from typing import Any, Final, Protocol

import httpx2
import ops

from aitenant_charm.flags import ControllerInputs, controller_args
from aitenant_charm.workload import LAYER, SERVICE, WORKLOAD_UID

logger = logging.getLogger(__name__)

# After a replan, how long the hook waits for the controller to answer /readyz, so the
# status that hook leaves is already the truth (a restart is ready in about 2 s; Pebble's
# own check only runs one period after the replan, and no event follows its first success).
CONTROLLER_START_SECONDS: Final = 30.0


def construct_layer(
    inputs: ControllerInputs,
    *,
    namespace: str,
    log_targets: Mapping[str, Mapping[str, Any]] | None = None,
) -> ops.pebble.Layer:
    """The Pebble layer that runs the controller in ``namespace`` (the model). Pure: no I/O."""
    health = f"http://localhost:{inputs.ports.health}"
    layer = ops.pebble.Layer(
        {
            "summary": "AITenant controller",
            "services": {
                SERVICE: {
                    "override": "replace",
                    "summary": "AITenant controller and admission webhook",
                    "command": shlex.join(controller_args(inputs)),
                    "startup": "enabled",
                    "user-id": WORKLOAD_UID,
                    "group-id": WORKLOAD_UID,
                    # No fingerprint of the CA here: the controller re-reads its CA
                    # files and webhook certificate when they change, so a rotation
                    # never restarts it (a restart would refuse admissions meanwhile).
                    "environment": {"POD_NAMESPACE": namespace},
                    "on-check-failure": {"alive": "restart"},
                }
            },
            "checks": {
                "alive": {
                    "override": "replace",
                    "level": "alive",
                    "period": "10s",
                    "threshold": 3,
                    "http": {"url": f"{health}/healthz"},
                },
                "ready": {
                    "override": "replace",
                    "level": "ready",
                    "period": "10s",
                    "threshold": 3,
                    "http": {"url": f"{health}/readyz"},
                },
            },
        }
    )
    for name, target in (log_targets or {}).items():
        layer.log_targets[name] = ops.pebble.LogTarget(name, dict(target))  # pyright: ignore[reportArgumentType]
    return layer


def replan(container: ops.Container, layer: ops.pebble.Layer, *, health_port: int) -> None:
    """Add the layer and replan, only when the plan differs; then wait (bounded) for the
    controller to answer /readyz, so the hook's status is already the truth."""
    if planned_as(container.get_plan(), layer):
        return
    container.add_layer(LAYER, layer, combine=True)
    try:
        container.replan()
    except ops.pebble.ChangeError as exc:
        # The real Pebble fails the replan when the service exits within its first
        # second; it keeps restarting it (backoff), which the status ladder reports.
        logger.warning("controller (re)planned but exited at once: %s", exc.err)
        return
    started = time.monotonic()
    deadline = started + CONTROLLER_START_SECONDS
    while not controller_ready("127.0.0.1", health_port):
        if time.monotonic() >= deadline:
            logger.info("controller (re)planned; not ready after %.0f s", deadline - started)
            return
        time.sleep(0.2)
    logger.info("controller (re)planned; ready after %.1f s", time.monotonic() - started)


def stop_controller(container: ops.Container) -> None:
    """Stop the controller if Pebble runs it or is about to (backoff); no-op otherwise."""
    if not container.can_connect():
        return
    # Anything but inactive: in backoff (between a crash and Pebble's restart) the
    # service is not "running", yet Pebble would start it again a moment later.
    current = service_status(container)
    if current not in ("", "inactive"):
        container.stop(SERVICE)
        logger.info("controller stopped (was %s)", current)


def service_status(container: ops.Container) -> str:
    """The controller service's current status as Pebble names it; "" when not in the plan.

    Pebble also reports "backoff" (between a crash and the restart), which ``ops`` has no
    enum member for and passes on as the plain string.
    """
    service = container.get_services(SERVICE).get(SERVICE)
    if service is None:
        return ""
    current = service.current
    return current.value if isinstance(current, ops.pebble.ServiceStatus) else str(current)


def ready_check_down(container: ops.Container) -> bool:
    """True when Pebble's ``ready`` check has failed its threshold."""
    checks = container.get_checks("ready")
    return "ready" in checks and checks["ready"].status == ops.pebble.CheckStatus.DOWN


def controller_ready(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when the controller answers ``/readyz`` with 200 on ``host:port`` right now."""
    try:
        answer = httpx2.get(f"http://{host}:{port}/readyz", timeout=timeout)
    except (httpx2.HTTPError, OSError):
        return False
    return answer.status_code == 200


def planned_as(plan: ops.pebble.Plan, layer: ops.pebble.Layer) -> bool:
    """True when the plan already holds the layer's services, checks and log targets."""
    return (
        _same_definitions(plan.services, layer.services)
        and _same_definitions(plan.checks, layer.checks)
        and _same_definitions(plan.log_targets, layer.log_targets)
    )


class _Definition(Protocol):
    def to_dict(self) -> Mapping[str, Any]: ...


def _same_definitions(
    current: Mapping[str, _Definition], desired: Mapping[str, _Definition]
) -> bool:
    """True when every desired Pebble service/check already has the same definition."""
    return all(
        name in current and current[name].to_dict() == item.to_dict()
        for name, item in desired.items()
    )
