"""Helpers of the e2e tests of running maas-api pods (test_platform_runs.py): a controller
that reaches each tenant's maas-api through its Service (``ServiceAddresses``), a tenant's
pods, Secret and lifecycle, calls to a pod over HTTPS, and what the node's kernel shows of a
container's process.
"""

from __future__ import annotations

import base64
import contextlib
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from devtools import images, samples
from devtools.cluster import LocalCluster
from devtools.maas_api import FakeMaasApi
from devtools.node import Node
from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Pod, Secret

from aitenant import contract
from aitenant.app import App
from aitenant.controllers.aitenant.service_ip import ServiceIPTransport
from aitenant.resources import AITenant
from aitenant.settings import DEFAULT_MAAS_API_URL_TEMPLATE

from ..harness import (
    AITENANT_NS,
    INFRA_NS,
    RunningController,
    bind_controller_roles,
    e2e_settings,
    eventually,
)
from ..tenants import get_tenant, make_tenant, wait_phase

# A pod's first start: image already present, sandbox, CNI, then the readiness probe's
# initial delay (docs/platform.md §1).
POD_READY_TIMEOUT = 90.0


END_CERT = "-----END CERTIFICATE-----"


class ServiceAddresses(ServiceIPTransport):
    """The controller's own transport for a process outside cluster DNS, noting where each
    request went."""

    def __init__(self, kube: AsyncClient, ca_file: Path) -> None:
        super().__init__(kube, ca_file)
        self.sent_to: list[str] = []

    async def cluster_ip(self, host: str) -> str:
        address = await super().cluster_ip(host)
        self.sent_to.append(address)
        return address


async def start_controller(
    cluster: LocalCluster,
    kube: AsyncClient,
    maas_api: FakeMaasApi,
    *,
    image: str | None = None,
    **overrides: Any,
) -> tuple[RunningController, ServiceAddresses]:
    """A controller like the session's, but revoking through each tenant's Service (the
    default URL template) rather than the in-process fake; ``overrides`` as in Settings."""
    values: dict[str, Any] = {
        "maas_api_url_template": DEFAULT_MAAS_API_URL_TEMPLATE,
        "maas_api_image": image or images.maas_api_image(),
        **overrides,
    }
    settings = e2e_settings(maas_api, **values)
    # The revocation client is the controller's own (docs/differences.md D2); only how a
    # Service name becomes an address differs from a pod's.
    ca_file = overrides.get("maas_api_ca_file", maas_api.ca_file)
    transport = ServiceAddresses(kube, ca_file)

    def route_revocations(app: App) -> None:
        reconciler: Any = getattr(app.aitenant_controller.reconcile, "__self__")  # noqa: B009
        reconciler.finalize.revocations.revoker.transport = transport

    running = RunningController(cluster, settings, prepare=route_revocations)
    await running.start()
    return running, transport


@contextlib.asynccontextmanager
async def own_aitenant_namespace(
    kube: AsyncClient, node_controller: tuple[RunningController, ServiceAddresses], name: str
) -> AsyncIterator[str]:
    """An AITenant namespace of its own, for a controller whose settings would roll every
    tenant's pods (another image, another CA) were it to serve the session's tenants; the
    module's controller is stopped meanwhile."""
    running, _ = node_controller
    await samples.ensure_namespace(kube, name)
    await bind_controller_roles(kube, aitenant_namespace=name)
    await running.stop()
    try:
        yield name
    finally:
        await running.start()


async def maas_api_pods(
    kube: AsyncClient, tenant: str, *, include_terminating: bool = True
) -> list[dict[str, Any]]:
    labels: dict[str, Any] = {
        contract.LABEL_APP_NAME: "maas-api",
        contract.LABEL_TENANT_NAME: tenant,
    }
    pods = [dict(p.to_dict()) async for p in kube.list(Pod, namespace=INFRA_NS, labels=labels)]
    return [p for p in pods if include_terminating or not p["metadata"].get("deletionTimestamp")]


async def maas_api_pod(kube: AsyncClient, tenant: str) -> dict[str, Any]:
    running = await maas_api_pods(kube, tenant, include_terminating=False)
    assert len(running) == 1, [p["metadata"]["name"] for p in running]
    return running[0]


async def tenant_gone(kube: AsyncClient, name: str, namespace: str = AITENANT_NS) -> None:
    async def gone() -> bool:
        try:
            await get_tenant(kube, name, namespace)
        except ApiError as exc:
            return exc.status.code == 404
        return False

    await eventually(gone, timeout=60, interval=0.2)


async def delete_tenant(kube: AsyncClient, name: str, namespace: str = AITENANT_NS) -> None:
    await kube.delete(AITenant, name, namespace=namespace)
    await tenant_gone(kube, name, namespace)


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


async def serving_secret(kube: AsyncClient, tenant: str) -> dict[str, bytes]:
    secrets = [
        s
        async for s in kube.list(
            Secret, namespace=INFRA_NS, labels={contract.LABEL_TENANT_NAME: tenant}
        )
        if s.type == "kubernetes.io/tls"
    ]
    assert len(secrets) == 1
    return {k: base64.b64decode(v) for k, v in (secrets[0].data or {}).items()}


async def call_pod(pod: dict[str, Any], ca_file: Path, method: str, path: str) -> httpx.Response:
    """Call the pod's own address (on our bridge) as its Service's DNS name."""
    service = f"maas-api-{pod['metadata']['labels'][contract.LABEL_TENANT_NAME]}"
    name = f"{service}.{INFRA_NS}.svc"
    async with httpx.AsyncClient(
        verify=ssl.create_default_context(cafile=ca_file), timeout=10
    ) as http:
        return await http.request(
            method,
            f"https://{pod['status']['podIP']}:8443{path}",
            headers={"Host": name},
            extensions={"sni_hostname": name},
        )


def container_process(cluster: LocalCluster, pod: dict[str, Any]) -> int:
    """The host pid of the pod's maas-api container (our containerd's task list)."""
    container_id = pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    ctr = ["ctr", "--address", str(Node(cluster).containerd_socket), "-n", "k8s.io"]
    out = subprocess.run(
        [*ctr, "tasks", "ls"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in out.splitlines()[1:]:
        words = line.split()
        if words and words[0] == container_id:
            return int(words[1])
    raise LookupError(f"no task {container_id}")


def process_facts(pid: int) -> tuple[list[int], dict[str, set[str]], int]:
    """A process's user ids, its mounts (point -> options) and effective capabilities."""
    status = Path(f"/proc/{pid}/status").read_text()
    uids = [int(u) for u in status.split("Uid:")[1].split()[:4]]
    capabilities = int(status.split("CapEff:")[1].split()[0], 16)
    mounts = {
        line.split()[4]: set(line.split()[5].split(","))
        for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
    }
    return uids, mounts, capabilities


async def active_tenant(
    kube: AsyncClient, name: str, namespace: str = AITENANT_NS
) -> dict[str, Any]:
    await make_tenant(kube, name, namespace=namespace)
    return await wait_phase(kube, name, "Active", timeout=POD_READY_TIMEOUT, namespace=namespace)
