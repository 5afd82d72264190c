"""The real charm under ``ops.testing.Harness``, talking to a real API server.

Only Juju and Pebble are simulated (by Harness); the charm's lightkube client reaches the
local control plane through ``KUBECONFIG``, with the rights ``juju trust`` would give it.
:class:`PlannedController` runs the command the charm planned for Pebble as a real controller
process, and restarts it when the charm changes the service definition, as a replan does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import shlex
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from devtools.cluster import free_port
from ops import testing
from ops._private.harness import _TestingPebbleClient  # pyright: ignore[reportPrivateUsage]

import charm
from aitenant_charm import lightkube_private, pebble_layer
from aitenant_charm.workload import CONTAINER, SERVICE
from charm import AITenantCharm
from charms.aitenant_k8s.v0.maas_api import MaasApiAppData

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[3]
APP = "aitenant-k8s"


class CharmThread:
    """A Harness for the leader of ``model`` and the one thread that may touch it.

    ops keeps the charm's state in SQLite, which only its creating thread may use; running
    every hook there also lets the event loop serve the controller's webhook while a hook
    waits on it, as the workload container would.
    """

    def __init__(self, kubeconfig: Path, model: str) -> None:
        self.kubeconfig = kubeconfig
        self.model = model
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._harness: testing.Harness[AITenantCharm] | None = None

    @property
    def harness(self) -> testing.Harness[AITenantCharm]:
        assert self._harness is not None
        return self._harness

    async def run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    def _begin(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            harness = testing.Harness(AITenantCharm)
        harness.set_model_name(self.model)
        harness.set_leader(True)
        harness.set_can_connect(CONTAINER, True)
        harness.begin()
        self._harness = harness

    def _cleanup(self) -> None:
        if self._harness is not None:
            client = self._harness.charm._client  # pyright: ignore[reportPrivateUsage]
            if client is not None:
                lightkube_private.close(client)
            self._harness.cleanup()

    @contextlib.asynccontextmanager
    async def begun(self) -> AsyncIterator[CharmThread]:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("KUBECONFIG", str(self.kubeconfig))
            mp.setenv("JUJU_VERSION", "3.6.4")
            # Harness's Pebble starts nothing: PlannedController starts the process after
            # the hook, so the hook must not wait for it (test_charm_pebble.py has the wait).
            mp.setattr(pebble_layer, "CONTROLLER_START_SECONDS", 0.0)
            await self.run(self._begin)
            try:
                yield self
            finally:
                await self.run(self._cleanup)
                self._executor.shutdown()


def relate_maas_api(harness: testing.Harness[AITenantCharm], infra_namespace: str) -> None:
    """The maas-api charm's side of the relation (call in the charm's thread)."""
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

    def __init__(self, charm_thread: CharmThread, kubeconfig: Path, log: Path) -> None:
        self.charm = charm_thread
        self.kubeconfig = kubeconfig
        self.log = log
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.restarts = 0
        self._definition: dict[str, Any] | None = None
        self._proc: asyncio.subprocess.Process | None = None

    def _planned(self) -> tuple[dict[str, Any], bool, Path]:
        """(service definition, running, container root), read in the charm's thread."""
        harness = self.charm.harness
        service = harness.get_container_pebble_plan(CONTAINER).services[SERVICE]
        container = harness.model.unit.get_container(CONTAINER)
        status = container.get_services(SERVICE).get(SERVICE)
        running = status is None or status.is_running()
        return dict(service.to_dict()), running, harness.get_filesystem_root(CONTAINER)

    def command(self, definition: dict[str, Any], root: Path) -> list[str]:
        args = shlex.split(definition["command"])
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
        definition, _, root = await self.charm.run(self._planned)
        env = {
            **os.environ,
            **definition.get("environment", {}),
            "PYTHONPATH": f"{ROOT / 'src'}",
        }
        with self.log.open("ab") as log:
            self._proc = await asyncio.create_subprocess_exec(
                *self.command(definition, root),
                env=env,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
            )
        self._definition = definition

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
        definition, running, _ = await self.charm.run(self._planned)
        if not running:
            await self.stop()
        elif definition != self._definition:
            self.restarts += 1
            await self.stop()
            await self.start()

    @contextlib.contextmanager
    def stopped_with_pebble(self) -> Iterator[None]:
        """While active, Pebble's stop of the service (from the charm's thread) ends the
        process before the call returns, as the real Pebble does."""
        loop = asyncio.get_running_loop()
        original = _TestingPebbleClient.stop_services

        def stop_services(
            client: _TestingPebbleClient,
            services: list[str],
            timeout: float = 30.0,
            delay: float = 0.1,
        ) -> Any:
            change = original(client, services, timeout=timeout, delay=delay)
            if SERVICE in services:
                asyncio.run_coroutine_threadsafe(self.stop(), loop).result(timeout)
            return change

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_TestingPebbleClient, "stop_services", stop_services)
            yield

    async def ready(self) -> bool:
        """The process answers /readyz with 200 (its informers have synced)."""
        try:
            async with httpx.AsyncClient(timeout=2) as http:
                answer = await http.get(f"http://127.0.0.1:{self.health_port}/readyz")
        except httpx.HTTPError:
            return False
        return answer.status_code == 200

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None
