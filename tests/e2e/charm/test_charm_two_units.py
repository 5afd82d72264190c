"""Two units, each controller under its own real Pebble in its own pod: a webhook CA switch
that refuses no admission.

Each unit is a pod (``pod_network.pod``: a network namespace with an address of its own) whose
workload container is a real Pebble (``real_pebble.RealPebble``) running the real controller;
the controllers reach this module's API server through a forwarder on the pods' side of this
machine. The app's Service lists both pods as endpoints, so the API server sends each
admission to one of the two webhooks at random, as in a cluster. The charm runs one hook at a
time through ``ops.testing`` (``tests.juju.model.Deployment``: two units, the peer relation
``aitenant-peers`` shared between them); the probes the charm sends to 127.0.0.1 (the webhook's
certificate, /readyz) reach the running unit's pod, whose network a charm container shares.

The switch: the internal CA comes due and the leader rotates it. The leader's controller
serves the new certificate within its hook; the other unit's serves the old one until that
unit's own hook writes the new files, so the leader must keep the old CA in caBundle until the
other unit publishes, on the peer relation, that its controller really serves the new
certificate. Meanwhile three threads send dry-run AITenant creates through the API server and
count every refusal (printed with ``-s``).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from unittest.mock import patch

import httpx
import ops
import pytest
from devtools import samples
from devtools.cluster import LocalCluster, User, free_port
from devtools.forwarder import Forwarder
from lightkube import Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.models import core_v1, discovery_v1
from lightkube.models.core_v1 import ServicePort, ServiceSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.core_v1 import Endpoints, Service
from lightkube.resources.discovery_v1 import EndpointSlice
from ops import testing

from aitenant.resources import AITenant
from aitenant_charm import lightkube_private, pebble_layer, pki, webhook_trust
from aitenant_charm.cluster_manifests import cluster_scoped_name
from aitenant_charm.internal_ca import INTERNAL_CA_LABEL
from aitenant_charm.workload import METRICS_PORT, SERVICE, WEBHOOK_PORT
from tests.juju.model import APP, Deployment

from .pod_network import Pod, kubeconfig_via, pod
from .real_pebble import RealPebble, real_pebble
from .test_charm_pebble import charm_cluster

pytestmark = pytest.mark.e2e

MODEL = "two-units"
AITENANT_NS = "ai-tenants"  # the charm's default `aitenant-namespace`
APP_USER = User(
    f"system:serviceaccount:{MODEL}:{APP}",
    "aitenant-two-units-token",
    ("system:serviceaccounts", f"system:serviceaccounts:{MODEL}"),
)
VWC = cluster_scoped_name(APP, MODEL)


# --- The deployment: two pods, two Pebbles, the charm's hooks --------------------------------


class PodDeployment(Deployment):
    """The units' hooks, with the charm's probes of 127.0.0.1 sent to the running unit's pod."""

    def __init__(self, pods: Mapping[int, Pod], pebbles: Mapping[int, RealPebble]) -> None:
        sockets = {unit: str(pebble.socket) for unit, pebble in pebbles.items()}
        super().__init__(None, model=MODEL, units=len(pods), pebble=sockets)
        self.pods = dict(pods)

    def _local(self, host: str) -> str:
        """127.0.0.1 as the running unit's charm container sees it: its pod."""
        return self.pods[self._unit_running().id].ip if host == "127.0.0.1" else host

    @contextlib.contextmanager
    def _boundary(self) -> Iterator[None]:
        served, ready = webhook_trust.served_certificate, pebble_layer.controller_ready

        def served_in_pod(host: str, port: int, timeout: float = 2.0) -> str | None:
            return served(self._local(host), port, timeout)

        def ready_in_pod(host: str, port: int, timeout: float = 2.0) -> bool:
            return ready(self._local(host), port, timeout)

        with (
            super()._boundary(),
            patch.object(webhook_trust, "served_certificate", served_in_pod),
            patch.object(pebble_layer, "controller_ready", ready_in_pod),
        ):
            yield

    def peers_changed(self, unit: int, remote: int) -> ops.StatusBase:
        """What Juju runs on ``unit`` after ``remote`` wrote to the peer relation."""
        assert self.peers is not None
        peers = self.peers.id
        return self.run(
            unit,
            lambda ctx, state: ctx.on.relation_changed(
                state.get_relation(peers), remote_unit=remote
            ),
        )

    def served_ca(self, unit: int) -> str:
        """The fingerprint ``unit`` published for the CA of what its controller serves."""
        assert self.peers is not None
        return self.peers.unit_data[unit].get(webhook_trust.SERVED_CA, "")

    def internal_ca_cert(self) -> str:
        """The internal CA's certificate, as the leader last wrote it."""
        content = self._internal_ca_secret().latest_content or {}
        return content[pki.CA_CERT]

    def _internal_ca_secret(self) -> testing.Secret:
        return next(s for s in self.secrets.values() if s.label == INTERNAL_CA_LABEL)

    def replace_internal_ca(self, ca: pki.KeyPair) -> None:
        """The CA secret now holds ``ca`` (as if it had been created long ago)."""
        secret = self._internal_ca_secret()
        content = {pki.CA_CERT: ca.cert_pem, pki.CA_KEY: ca.key_pem}
        replaced = dataclasses.replace(secret, tracked_content=content, latest_content=content)
        self.secrets[secret.id] = replaced


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    # Aggregator routing: the API server calls the webhook Service's endpoints (no kube-proxy).
    namespaces = (MODEL, AITENANT_NS, "maas-infra", "gateways")
    with charm_cluster(APP_USER, namespaces, aggregator_routing=True) as local:
        yield local


def expose_webhook(kube: Client, pods: list[Pod]) -> None:
    """What Juju and the cluster provide: the app's Service, its endpoints the pods."""
    port = WEBHOOK_PORT
    kube.create(
        Service(
            metadata=ObjectMeta(name=APP, namespace=MODEL),
            spec=ServiceSpec(ports=[ServicePort(name="webhook", port=port, targetPort=port)]),
        )
    )
    kube.create(
        Endpoints(
            metadata=ObjectMeta(name=APP, namespace=MODEL),
            subsets=[
                core_v1.EndpointSubset(
                    addresses=[core_v1.EndpointAddress(ip=p.ip) for p in pods],
                    ports=[core_v1.EndpointPort(name="webhook", port=port)],
                )
            ],
        )
    )
    kube.create(
        EndpointSlice(
            metadata=ObjectMeta(
                name=f"{APP}-pods", namespace=MODEL, labels={"kubernetes.io/service-name": APP}
            ),
            addressType="IPv4",
            endpoints=[discovery_v1.Endpoint(addresses=[p.ip]) for p in pods],
            ports=[discovery_v1.EndpointPort(name="webhook", port=port, protocol="TCP")],
        )
    )


@contextlib.contextmanager
def two_units(cluster: LocalCluster, tmp_path: Path) -> Iterator[PodDeployment]:
    """Two pods, each with a real Pebble whose controller reaches the API server through a
    forwarder on the pod's side of this machine; both units settled (Active)."""
    with contextlib.ExitStack() as stack:
        pods = [stack.enter_context(pod(index)) for index in range(2)]
        pebbles: dict[int, RealPebble] = {}
        for index, p in enumerate(pods):
            forwarder = Forwarder((p.host_ip, free_port()), ("127.0.0.1", cluster.api_port))
            stack.enter_context(forwarder.serving())
            kubeconfig = kubeconfig_via(
                cluster.kubeconfig_for(APP_USER),
                f"https://{p.host_ip}:{forwarder.server_address[1]}",
                tmp_path / f"kubeconfig-pod-{index}",
            )
            pebbles[index] = stack.enter_context(
                real_pebble(tmp_path, kubeconfig=kubeconfig, name=f"unit-{index}", netns=p.netns)
            )
            stack.callback(_stop_controller, pebbles[index])
        kube = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="tests")
        stack.callback(lightkube_private.close, kube)
        expose_webhook(kube, pods)
        mp = stack.enter_context(pytest.MonkeyPatch.context())
        mp.setenv("KUBECONFIG", str(cluster.kubeconfig))  # the charm's `juju trust`
        deployment = PodDeployment(dict(enumerate(pods)), pebbles)
        deployment.config.update(
            {"gateway-namespace": "gateways", "gateway-name": "maas-default-gateway"}
        )
        deployment.relate_maas_api()
        deployment.settle()
        yield deployment


def _stop_controller(pebble: RealPebble) -> None:
    with contextlib.suppress(ops.pebble.Error):
        pebble.client.stop_services([SERVICE])


# --- Watching the webhook ---------------------------------------------------------------------


@dataclasses.dataclass
class Admissions:
    attempted: int = 0
    refused: list[str] = dataclasses.field(default_factory=list)
    bundle_sizes: set[int] = dataclasses.field(default_factory=set)


class Probe:
    """Dry-run AITenant creates from ``CALLERS`` threads, each every 50 ms (admission runs,
    nothing is stored), and the number of CAs caBundle holds, sampled by the first.

    Several callers at once, because an API server without per-request webhook load balancing
    (the ``WebhookRoundTripLoadBalancing`` feature, on by default in 1.37; not in 1.32) picks
    the endpoint when it dials, and one caller at a time rides one kept-alive connection to one
    unit. Concurrent admissions need connections of their own, each dialled to a unit at
    random, as in a cluster."""

    CALLERS = 3

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.kube = Client(KubeConfig.from_file(kubeconfig), field_manager="tests")
        self.seen = Admissions()
        self._count = itertools.count(1)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(caller,), daemon=True)
            for caller in range(self.CALLERS)
        ]

    def once(self, kube: Client | None = None) -> bool:
        number = next(self._count)
        body = samples.aitenant(f"probe-{number}", AITENANT_NS)
        try:
            (kube or self.kube).create(AITenant.from_dict(body), dry_run=True)
        except ApiError as exc:
            with self._lock:
                self.seen.attempted += 1
                self.seen.refused.append(exc.status.message or str(exc.status.code))
            return False
        with self._lock:
            self.seen.attempted += 1
        return True

    def _run(self, caller: int) -> None:
        kube = Client(KubeConfig.from_file(self.kubeconfig), field_manager="tests")
        try:
            while not self._stop.is_set():
                self.once(kube)
                if caller == 0:
                    with contextlib.suppress(ApiError):
                        self.seen.bundle_sizes.add(len(published_cas(kube)))
                self._stop.wait(0.05)
        finally:
            lightkube_private.close(kube)

    def __enter__(self) -> Admissions:
        self.seen = Admissions()
        for thread in self._threads:
            thread.start()
        return self.seen

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        lightkube_private.close(self.kube)


def published_cas(kube: Client) -> set[str]:
    """Fingerprints of the CAs our webhook configuration's caBundle holds."""
    vwc = kube.get(ValidatingWebhookConfiguration, VWC)
    (webhook,) = vwc.webhooks or []
    return set(
        pki.der_sha256_fingerprints(base64.b64decode(webhook.clientConfig.caBundle or "").decode())
    )


def served_by(p: Pod) -> str:
    """The certificate the pod's webhook port presents."""
    served = webhook_trust.served_certificate(p.ip, WEBHOOK_PORT)
    assert served is not None, f"nothing serves on {p.ip}:{WEBHOOK_PORT}"
    return served


def reviews(p: Pod) -> float:
    """AdmissionReviews the pod's controller has decided (its /metrics)."""
    text = httpx.get(f"http://{p.ip}:{METRICS_PORT}/metrics", timeout=5).text
    (count,) = [
        float(line.split()[1])
        for line in text.splitlines()
        if line.startswith("aitenant_webhook_handler_seconds_count")
    ]
    return count


def eventually(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} not within {timeout} s"
        time.sleep(0.2)


# --- The test ---------------------------------------------------------------------------------


def test_a_ca_switch_with_two_units_refuses_no_admission(cluster: LocalCluster, tmp_path: Path):
    kube = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="tests")
    with contextlib.ExitStack() as stack:
        stack.callback(lightkube_private.close, kube)
        d = stack.enter_context(two_units(cluster, tmp_path))
        pods = [d.pods[0], d.pods[1]]
        # GIVEN two Active units whose controllers serve certificates from the internal CA
        # (the leader counts tenants: the default one exists once a controller made it)
        leader = d.run(0, lambda ctx, state: ctx.on.update_status())
        assert isinstance(leader, ops.ActiveStatus), leader
        assert leader.message in ("0 tenants", "1 tenant"), leader
        assert d.run(1, lambda ctx, state: ctx.on.update_status()) == ops.ActiveStatus(
            "standby (leader election is the controller's)"
        )
        old = d.internal_ca_cert()
        assert published_cas(kube) == {pki.der_sha256_fingerprint(old)}
        for unit, p in enumerate(pods):
            assert pki.issued_by(served_by(p), old)
            assert d.served_ca(unit) == pki.der_sha256_fingerprint(old)
        probe = Probe(cluster.kubeconfig)
        eventually(probe.once, 60, "an admission through the webhook")
        before = [reviews(p) for p in pods]

        with probe as seen:
            started = time.monotonic()
            # WHEN the internal CA comes due and the leader's update-status rotates it
            due = pki.generate_ca(
                "due CA", now=datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=330)
            )
            d.replace_internal_ca(due)
            d.run(0, lambda ctx, state: ctx.on.update_status())
            new = d.internal_ca_cert()
            assert new not in (old, due.cert_pem)
            # THEN the leader's controller serves the new certificate and the leader says so
            assert pki.issued_by(served_by(pods[0]), new)
            assert d.served_ca(0) == pki.der_sha256_fingerprint(new)
            # AND unit 1's controller still serves the old one, as unit 1 published, so the
            # old CA stays in caBundle next to the new one (and the one due, until it expires)
            assert pki.issued_by(served_by(pods[1]), old)
            assert d.served_ca(1) == pki.der_sha256_fingerprint(old)
            both = {
                pki.der_sha256_fingerprint(old),
                pki.der_sha256_fingerprint(new),
                pki.der_sha256_fingerprint(due.cert_pem),
            }
            assert published_cas(kube) == both
            # AND the leader's later hooks keep it while unit 1 has not moved
            d.run(0, lambda ctx, state: ctx.on.update_status())
            assert published_cas(kube) == both

            # WHEN unit 1 hears of the leader's change (its app databag) and reconciles
            d.peers_changed(1, remote=0)
            # THEN its controller serves the new certificate and unit 1 publishes that
            assert pki.issued_by(served_by(pods[1]), new)
            assert d.served_ca(1) == pki.der_sha256_fingerprint(new)
            # WHEN the leader hears of unit 1's publication
            d.peers_changed(0, remote=1)
            # THEN the old CA is gone; the new one and the one due remain
            assert published_cas(kube) == both - {pki.der_sha256_fingerprint(old)}
            dropped_after = time.monotonic() - started
            # AND a few more admissions go to the settled configuration
            more = seen.attempted + 20
            eventually(lambda: seen.attempted >= more, 30, "20 more admissions")

        after = [reviews(p) for p in pods]
        per_unit = [int(a - b) for a, b in zip(after, before, strict=True)]
        print(
            f"\nCA switch with two units: {seen.attempted} admissions attempted, "
            f"{len(seen.refused)} refused; reviews decided per unit {per_unit}; "
            f"caBundle sizes seen {sorted(seen.bundle_sizes)}; "
            f"old CA dropped {dropped_after:.1f} s after the rotation began"
        )
        # THEN no admission was refused, the switch was measured under load, and the API
        # server sent admissions to both controllers meanwhile
        assert seen.refused == [], seen.refused[:3]
        assert seen.attempted >= 50, seen.attempted
        assert all(count > 0 for count in per_unit), per_unit
        assert max(seen.bundle_sizes) == 3, seen.bundle_sizes
