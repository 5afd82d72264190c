"""Who reaches a tenant's maas-api, in packets (docs/platform.md §9, docs/differences.md D37):
the node enforces NetworkPolicies (kube-router's firewall: devtools/netpol.py), and each probe
is a TCP connection from a real pod on the node to a real maas-api pod (the stand-in image the
suite runs). test_network_peers.py checks the stored policies; this checks what they do.

A probe is this machine's curl run in a pod's network namespace (``nsenter --net``), so its
packets leave from the pod's address over the pod's veth, as the pod's own would. The probing
pods run the pause image with the labels of the peer they stand for.

Every "blocked" is shown to be the policy's doing: the same probe connects once an extra
NetworkPolicy admits that peer, so the address, port and listener were right all along.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest
from devtools import images, samples
from devtools.cluster import LocalCluster
from devtools.maas_api import FakeMaasApi
from lightkube import AsyncClient
from lightkube.core.client import LabelSelector
from lightkube.models.core_v1 import Container, PodSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import CronJob
from lightkube.resources.core_v1 import Pod, Service
from lightkube.resources.networking_v1 import NetworkPolicy

from aitenant import contract

from ..harness import GATEWAY_NS, INFRA_NS, RunningController, WebhookTLS, e2e_settings, eventually
from ..tenants import Names, make_tenant, wait_phase
from .maas_api_pods import container_process

pytestmark = pytest.mark.e2e

MAAS_API_PORT = 8443
# The controller's pods, as the charm names them (--controller-pod-selector).
CONTROLLER_LABELS = {"app.kubernetes.io/name": "aitenant-k8s"}
# A refused or dropped connection is given up on after this long.
CONNECT_TIMEOUT = 2
# How long a probe may take to show a policy's effect: kube-router's next sync after a pod or
# policy event (about a second here).
SETTLE = 45.0


@dataclass
class Prober:
    """A pause pod on the node, whose network namespace probes are run in."""

    name: str
    namespace: str
    labels: dict[str, str]
    ip: str
    pid: int

    def peer(self) -> dict[str, Any]:
        """A NetworkPolicy peer that admits exactly this pod."""
        return {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
            "podSelector": {"matchLabels": self.labels},
        }


def connects(prober: Prober, url: str) -> bool:
    """Whether a TCP connection from ``prober`` to ``url`` is made and answered over HTTP(S)."""
    done = subprocess.run(
        [
            "nsenter",
            f"--net=/proc/{prober.pid}/ns/net",
            "curl",
            "-sk",
            "-o",
            "/dev/null",
            "--connect-timeout",
            str(CONNECT_TIMEOUT),
            "-m",
            "10",
            url,
        ],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


async def reaches(prober: Prober, url: str, expected: bool) -> None:
    """Poll until a probe from ``prober`` to ``url`` connects (``expected``) or not."""

    async def check() -> bool:
        return await asyncio.to_thread(connects, prober, url) == expected

    try:
        await eventually(check, timeout=SETTLE, interval=0.5)
    except AssertionError:
        verdict = "connect" if expected else "be blocked"
        raise AssertionError(f"{prober.namespace}/{prober.name} did not {verdict}: {url}") from None


async def run_prober(
    kube: AsyncClient, cluster: LocalCluster, name: str, namespace: str, labels: dict[str, str]
) -> Prober:
    pod_body = Pod(
        metadata=ObjectMeta(name=name, namespace=namespace, labels=labels),
        spec=PodSpec(
            containers=[Container(name="probe", image=images.PAUSE_IMAGE, imagePullPolicy="Never")],
            terminationGracePeriodSeconds=0,
        ),
    )

    async def created() -> bool:
        # Refused (403) until a new namespace's default ServiceAccount exists, where the
        # ServiceAccount admission plugin runs.
        await kube.create(pod_body)
        return True

    await eventually(created, timeout=30, interval=0.5)

    async def running() -> dict[str, Any] | None:
        pod = (await kube.get(Pod, name, namespace=namespace)).to_dict()
        status = pod.get("status") or {}
        statuses = status.get("containerStatuses") or []
        if status.get("podIP") and statuses and statuses[0].get("state", {}).get("running"):
            return pod
        return None

    pod = await eventually(running, timeout=60)
    return Prober(name, namespace, labels, pod["status"]["podIP"], container_process(cluster, pod))


@contextlib.asynccontextmanager
async def admitted(
    kube: AsyncClient, name: str, namespace: str, target: dict[str, str], peer: dict[str, Any]
) -> AsyncIterator[None]:
    """An extra NetworkPolicy admitting ``peer`` to the pods labelled ``target`` meanwhile
    (policies add up: this one widens whatever else selects them)."""
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "podSelector": {"matchLabels": target},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [peer]}],
        },
    }
    await kube.create(cast(NetworkPolicy, NetworkPolicy.from_dict(policy)))
    try:
        yield
    finally:
        await kube.delete(NetworkPolicy, name, namespace=namespace)


@dataclass
class Tenant:
    name: str
    pod_labels: dict[str, str]
    url: str  # its maas-api pod's address
    service_url: str  # its maas-api Service's ClusterIP
    cleanup_labels: dict[str, str]


async def running_tenant(kube: AsyncClient, name: str) -> Tenant:
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    instance = {contract.LABEL_TENANT_INSTANCE: f"maas-api-{name}"}
    pods = kube.list(Pod, namespace=INFRA_NS, labels={**instance})
    (pod,) = [p async for p in pods]
    assert pod.status is not None
    assert pod.status.podIP
    by_tenant: LabelSelector = {contract.LABEL_TENANT_NAME: name}
    (service,) = [s async for s in kube.list(Service, namespace=INFRA_NS, labels=by_tenant)]
    assert service.spec is not None
    assert service.spec.clusterIP
    (cronjob,) = [c async for c in kube.list(CronJob, namespace=INFRA_NS, labels=by_tenant)]
    template = cronjob.to_dict()["spec"]["jobTemplate"]["spec"]["template"]["metadata"]
    return Tenant(
        name=name,
        pod_labels=instance,
        url=f"https://{pod.status.podIP}:{MAAS_API_PORT}/",
        service_url=f"https://{service.spec.clusterIP}:{MAAS_API_PORT}/",
        cleanup_labels=dict(template["labels"]),
    )


@contextlib.contextmanager
def listening(prober: Prober, port: int) -> Iterator[None]:
    """An HTTP server in ``prober``'s network namespace (the pause pod serves nothing)."""
    server = subprocess.Popen(
        [
            "nsenter",
            f"--net=/proc/{prober.pid}/ns/net",
            "python3",
            "-m",
            "http.server",
            "--bind",
            "0.0.0.0",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        server.terminate()
        server.wait(timeout=10)


async def blocked_by_policy(
    kube: AsyncClient,
    prober: Prober,
    url: str,
    *,
    policy: str,
    namespace: str,
    target: dict[str, str],
) -> None:
    """The probe is blocked, connects once an extra policy admits ``prober`` to ``target``,
    and is blocked again when that policy goes."""
    await reaches(prober, url, expected=False)
    async with admitted(kube, policy, namespace, target, prober.peer()):
        await reaches(prober, url, expected=True)
    await reaches(prober, url, expected=False)


@pytest.fixture
async def narrowed(
    cluster: LocalCluster,
    controller: RunningController,
    maas_api: FakeMaasApi,
    webhook_tls: WebhookTLS,
) -> AsyncIterator[RunningController]:
    """A controller told its own pods' labels (as the charm tells it), instead of the session's
    (which admits every pod of its namespace)."""
    await controller.stop()
    selector = ",".join(f"{k}={v}" for k, v in CONTROLLER_LABELS.items())
    running = RunningController(
        cluster, e2e_settings(maas_api, webhook_tls, controller_pod_selector=selector)
    )
    await running.start()
    try:
        yield running
    finally:
        await running.stop()
        await controller.start()


async def test_maas_api_admits_only_its_peers_on_the_wire(
    cluster: LocalCluster, kube: AsyncClient, narrowed: RunningController, unique: Names
) -> None:
    a, b = await asyncio.gather(
        running_tenant(kube, unique("wire-a")), running_tenant(kube, unique("wire-b"))
    )
    unrelated = unique("unrelated")
    await samples.ensure_namespace(kube, unrelated)
    gateway_name = "gateway.networking.k8s.io/gateway-name"
    prober_specs = {
        "gateway": (GATEWAY_NS, {gateway_name: a.name}),
        "other-gateway": (GATEWAY_NS, {gateway_name: b.name}),
        "controller": (INFRA_NS, CONTROLLER_LABELS),
        "not-controller": (INFRA_NS, {"app.kubernetes.io/name": "something-else"}),
        "cleanup": (INFRA_NS, a.cleanup_labels),
        "unrelated": (unrelated, {"app": "probe"}),
        "tenant-a-ns": (contract.TENANT_NAMESPACE_PREFIX + a.name, {"app": "probe"}),
    }
    probers = dict(
        zip(
            prober_specs,
            await asyncio.gather(
                *(
                    run_prober(kube, cluster, unique(f"probe-{role}"), ns, labels)
                    for role, (ns, labels) in prober_specs.items()
                )
            ),
            strict=True,
        )
    )

    # Admitted: the tenant's Gateway's pods (to the pod and through the Service, as routed
    # traffic comes), the controller's pods, the tenant's own key-cleanup pods.
    await reaches(probers["gateway"], a.url, expected=True)
    await reaches(probers["gateway"], a.service_url, expected=True)
    await reaches(probers["controller"], a.url + "internal/v1/api-keys", expected=True)
    await reaches(probers["cleanup"], a.url, expected=True)

    # Refused, each shown to be the policy's doing.
    for role, target, url in (
        ("not-controller", a, a.url + "internal/v1/api-keys"),
        ("other-gateway", a, a.url),
        ("unrelated", a, a.url),
        ("tenant-a-ns", b, b.url),
    ):
        await blocked_by_policy(
            kube,
            probers[role],
            url,
            policy=unique(f"admit-{role}"),
            namespace=INFRA_NS,
            target=target.pod_labels,
        )

    # Key-cleanup pods accept no ingress, not even from the Gateway's pods maas-api admits.
    with listening(probers["cleanup"], MAAS_API_PORT):
        await blocked_by_policy(
            kube,
            probers["gateway"],
            f"http://{probers['cleanup'].ip}:{MAAS_API_PORT}/",
            policy=unique("admit-to-cleanup"),
            namespace=INFRA_NS,
            target=a.cleanup_labels,
        )

    for prober in probers.values():
        await kube.delete(Pod, prober.name, namespace=prober.namespace, grace_period=0)
