"""The real charm under ``ops.testing.Harness``, talking to a real API server.

Only Juju and Pebble are simulated (by Harness); the charm's lightkube client reaches the
local control plane through ``KUBECONFIG``, with the rights ``juju trust`` would give it.
:class:`PlannedController` runs the command the charm planned for Pebble as a real controller
process, and restarts it when the charm changes the service definition, as a replan does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ops import testing

import charm
from aitenant.testing.cluster import free_port
from charm import AITenantCharm
from charms.aitenant_k8s.v0.maas_api import MaasApiAppData

ROOT = Path(__file__).resolve().parents[2]
APP = "aitenant-k8s"


@contextlib.contextmanager
def charm_harness(kubeconfig: Path, model: str) -> Iterator[testing.Harness[AITenantCharm]]:
    """A begun Harness for the leader of ``model``, its lightkube client on ``kubeconfig``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KUBECONFIG", str(kubeconfig))
        mp.setenv("JUJU_VERSION", "3.6.4")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            harness = testing.Harness(AITenantCharm)
        harness.set_model_name(model)
        harness.set_leader(True)
        harness.set_can_connect(charm.CONTAINER, True)
        harness.begin()
        try:
            yield harness
        finally:
            harness.cleanup()


def relate_maas_api(harness: testing.Harness[AITenantCharm], infra_namespace: str) -> None:
    bag: dict[str, str] = {}
    MaasApiAppData(
        image="quay.io/opendatahub/maas-api:v1",
        infra_namespace=infra_namespace,
        service_name="maas-api",
        service_port=8443,
        db_secret="maas-db-config",
    ).dump(bag)
    harness.add_relation(charm.MAAS_API_RELATION, "maas-api-k8s", app_data=bag)


class PlannedController:
    """The Pebble service the charm planned, run as a process on this machine.

    Paths under ``/etc/aitenant`` point into the Harness container's filesystem; the health
    and metrics ports are free ports (the webhook keeps the charm's port, which its Service
    and its own probe use); the process authenticates with ``kubeconfig``.
    """

    def __init__(
        self, harness: testing.Harness[AITenantCharm], kubeconfig: Path, log: Path
    ) -> None:
        self.harness = harness
        self.kubeconfig = kubeconfig
        self.log = log
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.restarts = 0
        self._definition: dict[str, Any] | None = None
        self._proc: asyncio.subprocess.Process | None = None

    def _service(self) -> Any:
        return self.harness.get_container_pebble_plan(charm.CONTAINER).services[charm.SERVICE]

    def command(self) -> list[str]:
        root = self.harness.get_filesystem_root(charm.CONTAINER)
        args = shlex.split(self._service().command)
        assert args[0] == "aitenant-controller"
        rewritten = [sys.executable, "-m", "aitenant"]
        for arg in args[1:]:
            flag, _, value = arg.partition("=")
            if value.startswith("/etc/aitenant"):
                arg = f"{flag}={root}{value}"
            rewritten.append(arg)
        return [
            *rewritten,
            f"--health-port={self.health_port}",
            f"--metrics-port={self.metrics_port}",
            f"--kubeconfig={self.kubeconfig}",
        ]

    async def start(self) -> None:
        service = self._service()
        env = {
            **os.environ,
            **service.environment,
            "PYTHONPATH": f"{ROOT / 'src'}",
        }
        with self.log.open("ab") as log:
            self._proc = await asyncio.create_subprocess_exec(
                *self.command(), env=env, stdout=log, stderr=asyncio.subprocess.STDOUT
            )
        self._definition = service.to_dict()

    async def stop(self) -> None:
        if self._proc is None or self._proc.returncode is not None:
            return
        self._proc.terminate()
        try:
            await asyncio.wait_for(self._proc.wait(), 15)
        except TimeoutError:
            self._proc.kill()
            await self._proc.wait()

    async def sync(self) -> None:
        """Restart when the planned service changed, as Pebble's replan would; stop when
        the charm stopped the service."""
        container = self.harness.model.unit.get_container(charm.CONTAINER)
        status = container.get_services(charm.SERVICE).get(charm.SERVICE)
        if status is not None and not status.is_running():
            await self.stop()
        elif self._service().to_dict() != self._definition:
            self.restarts += 1
            await self.stop()
            await self.start()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None
