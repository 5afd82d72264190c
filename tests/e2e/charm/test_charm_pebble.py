"""The charm with the real Pebble: its layer, its checks, its status, restarts and removal.

Each unit's workload container is a real Pebble (``real_pebble.RealPebble``: started with
``--hold`` and the rock's own layer loaded, as Juju starts it) running the real controller
against this module's API server; the charm runs one hook at a time through ``ops.testing``
(a fresh charm per hook, ``tests.juju.model.Deployment``) with its container bound to that Pebble
and its lightkube client on the API server (``juju trust``'s rights).

Figures (printed with ``-s``): the time from a replan to a truthful Active, and the time
Pebble takes to restart the controller after a SIGKILL and to have it ready again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import httpx
import ops
import pytest
from devtools import crds
from devtools.cluster import LocalCluster, User, free_port
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace

import charm
from aitenant_charm import lightkube_private
from aitenant_charm.workload import HEALTH_PORT, SERVICE, WEBHOOK_PORT
from tests.juju.model import APP, Deployment

from .real_pebble import RealPebble, real_pebble

pytestmark = pytest.mark.e2e

MODEL = "pebble-model"
INFRA_NS = (
    "maas-infra"  # the maas-api relation's infra namespace (tests/juju/model.py's default data)
)
APP_USER = User(
    f"system:serviceaccount:{MODEL}:{APP}",
    "aitenant-pebble-app-token",
    ("system:serviceaccounts", f"system:serviceaccounts:{MODEL}"),
)
ACTIVE = ops.ActiveStatus("0 tenants")
HEALTH = f"http://127.0.0.1:{HEALTH_PORT}"


def figure(name: str, value: float) -> None:
    print(f"\nFIGURE {name}: {value:.2f} s")


# --- The cluster, and a receiver speaking Loki's push API -----------------------------------


@contextlib.contextmanager
def charm_cluster(
    app_user: User, namespaces: Iterable[str], **options: Any
) -> Iterator[LocalCluster]:
    """A control plane for a charm under test: its app's user, ``namespaces``, and every CRD
    of other projects (real ones and stand-ins); ``options`` go to ``LocalCluster``."""
    with LocalCluster(extra_users=[app_user], **options) as local:
        kube = Client(KubeConfig.from_file(local.kubeconfig), field_manager="tests")
        for name in namespaces:
            with contextlib.suppress(ApiError):
                kube.create(Namespace(metadata=ObjectMeta(name=name)))
        install_crds(kube, crds.third_party_and_stand_ins())
        lightkube_private.close(kube)
        yield local


@pytest.fixture(scope="module")
def pebble_cluster() -> Iterator[LocalCluster]:
    with charm_cluster(APP_USER, (MODEL, INFRA_NS, "ai-tenants", "gateways")) as local:
        yield local


def install_crds(kube: Client, documents: list[dict[str, Any]], timeout: float = 60) -> None:
    for doc in documents:
        crd = cast(CustomResourceDefinition, CustomResourceDefinition.from_dict(doc))
        kube.apply(crd, force=True)
    deadline = time.monotonic() + timeout
    for doc in documents:
        while True:
            crd = kube.get(CustomResourceDefinition, doc["metadata"]["name"])
            conditions = (crd.status.conditions if crd.status else None) or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                break
            assert time.monotonic() < deadline, f"CRD {doc['metadata']['name']} not established"
            time.sleep(0.1)


@dataclass
class LokiReceiver:
    """``POST /loki/api/v1/push`` with Loki's JSON body; keeps every stream it receives."""

    port: int = field(default_factory=free_port)
    streams: list[dict[str, Any]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/loki/api/v1/push"

    @contextlib.contextmanager
    def serving(self) -> Iterator[LokiReceiver]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/loki/api/v1/push":
                    receiver.streams += json.loads(body).get("streams", [])
                    self.send_response(204)
                else:
                    self.send_response(404)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()


# --- One unit: its Pebble, its charm --------------------------------------------------------


@dataclass
class Unit:
    deployment: Deployment
    pebble: RealPebble

    def hook(self, event: Callable[[Any, Any], Any]) -> ops.StatusBase:
        return self.deployment.run(0, event)

    def config_changed(self, **options: str) -> ops.StatusBase:
        self.deployment.config.update(options)
        return self.hook(lambda ctx, state: ctx.on.config_changed())

    def update_status(self) -> ops.StatusBase:
        return self.hook(lambda ctx, state: ctx.on.update_status())


def ready_now() -> bool:
    try:
        return httpx.get(f"{HEALTH}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def unit(
    cluster: LocalCluster,
    tmp_path: Path,
    *,
    model: str = MODEL,
    loki: LokiReceiver | None = None,
    name: str = "unit-0",
    crashing: bool = False,
) -> Iterator[Unit]:
    """One unit of a deployment in ``model``, its container bound to a fresh real Pebble
    (``crashing``: whose controller cannot authenticate, so each start fails)."""
    kubeconfig = None if crashing else cluster.kubeconfig_for(APP_USER)
    with (
        real_pebble(tmp_path, kubeconfig=kubeconfig, name=name) as pebble,
        pytest.MonkeyPatch.context() as mp,
    ):
        mp.setenv("KUBECONFIG", str(cluster.kubeconfig))
        deployment = Deployment(None, model=model, pebble={0: str(pebble.socket)})
        deployment.config.update(
            {"gateway-namespace": "gateways", "gateway-name": "maas-default-gateway"}
        )
        deployment.relate_maas_api()
        if loki is not None:
            endpoint = json.dumps({"url": loki.url})
            deployment.relate(
                charm.LOGGING_RELATION, "loki-k8s", remote_units_data={0: {"endpoint": endpoint}}
            )
        try:
            yield Unit(deployment, pebble)
        finally:
            with contextlib.suppress(ops.pebble.Error):
                pebble.client.stop_services([SERVICE])


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll every 20 ms; the seconds it took."""
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < timeout, f"{what} not within {timeout} s"
        time.sleep(0.02)
    return time.monotonic() - start


@contextlib.contextmanager
def occupied(port: int) -> Iterator[None]:
    """Something else listens on ``port`` (the controller's webhook cannot bind it)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.monotonic() + 5
        while True:
            try:
                sock.bind(("0.0.0.0", port))
                break
            except OSError:
                assert time.monotonic() < deadline, f"port {port} never came free"
                time.sleep(0.005)
        sock.listen()
        yield


# --- Tests ----------------------------------------------------------------------------------


def test_the_charms_layer_under_real_pebble(
    pebble_cluster: LocalCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.INFO, logger="charm")
    with LokiReceiver().serving() as loki, unit(pebble_cluster, tmp_path, loki=loki) as u:
        client = u.pebble.client
        # GIVEN a container as Juju starts it: the rock's service planned, nothing running
        assert client.get_plan().services[SERVICE].command.startswith("aitenant-controller")
        assert u.pebble.service(SERVICE) == "inactive"
        # WHEN the unit installs (not a hook the charm reconciles on)
        # THEN the rock's service is not taken for the charm's
        assert u.hook(lambda ctx, state: ctx.on.install()) != ACTIVE

        # WHEN config-changed reconciles: the real Pebble accepts the layer, the controller runs
        status = u.config_changed()
        # THEN the hook ends Active, and only after the controller answered /readyz
        assert status == ACTIVE, u.pebble.tail()
        assert ready_now()
        (replanned,) = [r for r in caplog.records if "(re)planned; ready after" in r.message]
        seconds = float(replanned.getMessage().split("ready after ")[1].split(" s")[0])
        figure("replan to a truthful Active (in the hook)", seconds)
        plan = client.get_plan()
        assert plan.services[SERVICE].user_id == 584792
        assert set(plan.checks) == {"alive", "ready"}
        # AND Pebble's ready check, which first runs one period after the replan, says "up"
        # with no success yet: the charm did not take that for readiness
        (ready_check,) = client.get_checks(names=["ready"])
        if ready_check.successes == 0:
            assert ready_check.status == ops.pebble.CheckStatus.UP
        first = u.pebble.controller_pid()
        assert first is not None

        # WHEN an identical replan comes (any reconciling hook)
        assert u.config_changed() == ACTIVE
        # THEN nothing restarts
        assert u.pebble.controller_pid() == first
        # WHEN an option changes the command
        before = {c.id for c in client.get_changes(select=ops.pebble.ChangeState.ALL)}
        assert u.config_changed(**{"log-level": "debug"}) == ACTIVE
        # THEN the controller restarted once
        second = u.pebble.controller_pid()
        assert second not in (None, first)
        new = [
            c for c in client.get_changes(select=ops.pebble.ChangeState.ALL) if c.id not in before
        ]
        # (a replan also restarts the checks: "perform-check" changes)
        services = [c.kind for c in new if c.kind in ("replan", "start", "stop", "restart")]
        assert services == ["replan"], [c.summary for c in new]

        # WHEN the controller is killed
        assert second is not None
        timeline: list[tuple[float, float, ops.StatusBase]] = []
        stop = threading.Event()

        def hooks() -> None:
            while not stop.is_set():
                began = time.monotonic()
                status = u.update_status()
                timeline.append((began, time.monotonic(), status))

        killed = time.monotonic()
        os.kill(second, signal.SIGKILL)
        watcher = threading.Thread(target=hooks)
        watcher.start()
        try:
            restarted = wait_for(
                lambda: u.pebble.controller_pid() not in (None, second), 10, "restart"
            )
            ready_again = wait_for(ready_now, 20, "/readyz after the restart")
            time.sleep(2)
        finally:
            stop.set()
            watcher.join()
        figure("Pebble restarts the controller after SIGKILL", restarted)
        figure("controller ready again after SIGKILL", ready_again)
        # THEN no hook that ended before the controller was ready again said Active, at
        # least one said it was not, and the last ones say Active again
        ready_at = killed + ready_again
        early = [status for _, ended, status in timeline if ended < ready_at]
        print(f"\nstatuses of {len(timeline)} update-status hooks while it restarted:")
        print(sorted({repr(status) for _, _, status in timeline}))
        assert ACTIVE not in early, timeline
        assert any(status != ACTIVE for status in early), timeline
        assert timeline[-1][2] == ACTIVE

        # AND the log target forwards the controller's lines with the charm's labels
        wait_for(lambda: any(s["values"] for s in loki.streams), 15, "logs at the receiver")
        labels = loki.streams[0]["stream"]
        assert labels["juju_model"] == MODEL
        assert labels["juju_application"] == APP
        assert labels["juju_unit"] == f"{APP}/0"
        assert labels["pebble_service"] == SERVICE
        lines = [value[1] for s in loki.streams for value in s["values"]]
        assert any("aitenant" in line.lower() for line in lines), lines[:5]


def _in_backoff(u: Unit) -> None:
    """Kill the controller while its webhook port is taken: each restart fails, so Pebble
    keeps it in backoff (1 s, 2 s, 4 s, ... between attempts)."""
    pid = u.pebble.controller_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)


def test_prepare_removal_stops_a_controller_in_backoff(
    pebble_cluster: LocalCluster, tmp_path: Path
):
    with unit(pebble_cluster, tmp_path) as u:
        # GIVEN a controller that keeps crashing (its webhook port is taken)
        assert u.config_changed() == ACTIVE, u.pebble.tail()
        _in_backoff(u)
        with occupied(WEBHOOK_PORT):
            wait_for(lambda: u.pebble.service(SERVICE) == "backoff", 20, "backoff")
            # WHEN the operator runs prepare-removal while Pebble waits to restart it
            results = u.deployment.action(0, charm.PREPARE_REMOVAL_ACTION)
            assert results["released"] == "0"
            # THEN the service is stopped and stays stopped past the next restart time
            assert u.pebble.service(SERVICE) == "inactive"
            time.sleep(5)
            assert u.pebble.service(SERVICE) == "inactive"
            assert u.update_status() == ops.BlockedStatus(
                "prepared for removal: controller stopped, finalizers released; "
                f"run `juju remove-application {APP}`"
            )


def test_a_second_deployment_stops_its_controller_in_backoff(
    pebble_cluster: LocalCluster, tmp_path: Path
):
    with unit(pebble_cluster, tmp_path, name="first") as first:
        # GIVEN a first deployment serving the cluster
        assert first.config_changed() == ACTIVE, first.pebble.tail()
        first.pebble.client.stop_services([SERVICE])
    with unit(
        pebble_cluster, tmp_path, model="second-model", name="second", crashing=True
    ) as second:
        # AND a second deployment whose container runs the rock's controller, crashing
        with contextlib.suppress(ops.pebble.ChangeError):  # it exits within a second
            second.pebble.client.replan_services()
        wait_for(lambda: second.pebble.service(SERVICE) == "backoff", 20, "backoff")
        # WHEN it reconciles
        status = second.config_changed()
        # THEN it says the cluster is taken, and its controller is stopped for good
        assert status == ops.BlockedStatus(
            f"model {MODEL!r} already runs this charm on the cluster (ClusterRoleBinding "
            f"aitenant.{MODEL}.{APP}); one deployment per cluster"
        )
        assert second.pebble.service(SERVICE) == "inactive"
        time.sleep(5)
        assert second.pebble.service(SERVICE) == "inactive"
