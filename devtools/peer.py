"""Any controller that reconciles AITenants, started from a shell command, on a LocalCluster.

The parity tool, the side-by-side benchmark and the peer e2e module compare our controller with
a *peer* (e.g. the reference controller, built outside this repository). Both are started the
same way: a shell command (``bash -c``) with this environment, which the command may use:

* ``KUBECONFIG``: a kubeconfig of the ``controller`` user (in ``system:masters``); the audit
  log names every request it sends;
* ``TMPDIR``: a folder holding ``k8s-webhook-server/serving-certs/tls.{crt,key}``, a serving
  certificate for 127.0.0.1 (controller-runtime's default webhook certificate folder);
* ``HEALTH_PORT``: a free loopback port for ``/readyz`` (the harness waits for it);
* ``CONTROLLER_NAMESPACE``, ``INFRA_NAMESPACE``, ``GATEWAY_NAMESPACE``, ``AITENANT_NAMESPACE``;
* ``MAAS_API_IMAGE`` and ``MAAS_API_CLEANUP_IMAGE``: the images the node holds for maas-api and
  the key-cleanup CronJob (devtools/images.py), also as ``RELATED_IMAGE_ODH_MAAS_API_IMAGE``
  and ``RELATED_IMAGE_UBI_MINIMAL_IMAGE``, the variables the reference controller reads them
  from. No registry is reachable, so a peer that renders other images never gets its pods.

What the cluster holds before the command starts (``prepare``): our CRDs, the real Gateway API,
Kuadrant, Authorino AuthConfig, Istio DestinationRule/EnvoyFilter/Telemetry and cert-manager
Certificate CRDs (from the Go modules locked in ``tools/crds``), then the peer's own CRDs from
``AITENANT_PEER_CRDS`` if set (they replace ours); the namespaces; the ``maas-db-config`` Secret
in the infra namespace; a ``maas-controller`` Deployment in the controller namespace (the
reference creates ``Config/default`` only when it exists; it runs the pause image). The
cluster has one node (``devtools/node.py``): Deployments turn Available from what its
kubelet reports, whoever made them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml
from lightkube import ApiError, AsyncClient
from lightkube.resources.apps_v1 import Deployment

from aitenant import manifests
from devtools import bench, crds, images, samples
from devtools.cluster import User, free_port

PEER_COMMAND_ENV = "AITENANT_PEER_COMMAND"
PEER_CRDS_ENV = "AITENANT_PEER_CRDS"
HOW_TO_RUN = (
    f"set {PEER_COMMAND_ENV}='<shell command starting the peer>' (and {PEER_CRDS_ENV}=<its CRD "
    "folder>) to compare with another controller; see benchmarks/README.md"
)

CONTROLLER_USER = User("controller", "controller-token", ("system:masters",))
CONTROLLER_NS = "maas-system"
INFRA_NS = "maas-infra"
GATEWAY_NS = "gateways"
AITENANT_NS = "ai-tenants"

# Where controller-runtime serves its webhook, on every interface; no flag of the reference's
# changes it, so only one such peer can run on a machine at a time.
PEER_WEBHOOK_PORT = 9443

# Module -> (folder, file, CRD names to install from it).
PEER_MODULE_CRDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "github.com/kuadrant/authorino": (
        "install/crd",
        "authorino.kuadrant.io_authconfigs.yaml",
        ("authconfigs.authorino.kuadrant.io",),
    ),
    "istio.io/api": (
        "kubernetes",
        "customresourcedefinitions.gen.yaml",
        (
            "destinationrules.networking.istio.io",
            "envoyfilters.networking.istio.io",
            "telemetries.telemetry.istio.io",
        ),
    ),
    "github.com/cert-manager/cert-manager": (
        "deploy/crds",
        "cert-manager.io_certificates.yaml",
        ("certificates.cert-manager.io",),
    ),
}


def peer_command() -> str | None:
    return os.environ.get(PEER_COMMAND_ENV) or None


def peer_crd_documents(folder: Path | None) -> list[dict[str, Any]]:
    """The CRDs a peer needs besides the suite's: Authorino, Istio, cert-manager, its own."""
    found: list[dict[str, Any]] = []
    for module, (sub, name, wanted) in PEER_MODULE_CRDS.items():
        path = crds.module_dir(module) / sub / name
        for doc in yaml.safe_load_all(path.read_text("utf-8")):
            if (
                doc
                and doc.get("kind") == "CustomResourceDefinition"
                and (doc["metadata"]["name"] in wanted)
            ):
                found.append(doc)
    if folder is not None:
        found.extend(manifests.crd_documents(folder))
    return found


def our_command(ca_file: Path, ca_key_file: Path, extra: str = "") -> str:
    """The shell command that starts our controller with the peer environment."""
    return (
        f'exec {shlex.quote(sys.executable)} -m aitenant --kubeconfig "$KUBECONFIG"'
        ' --controller-namespace "$CONTROLLER_NAMESPACE" --infra-namespace "$INFRA_NAMESPACE"'
        ' --gateway-namespace "$GATEWAY_NAMESPACE" --aitenant-namespace "$AITENANT_NAMESPACE"'
        ' --enable-tenant-namespace-discovery --health-port "$HEALTH_PORT" --metrics-port 0'
        " --webhook-port 0 --bind-address 127.0.0.1 --log-level info"
        f" --maas-api-ca-file {shlex.quote(str(ca_file))}"
        f" --maas-api-ca-key-file {shlex.quote(str(ca_key_file))}"
        ' --maas-api-image "$MAAS_API_IMAGE" --maas-api-cleanup-image "$MAAS_API_CLEANUP_IMAGE"'
        f" {extra}"
    )


async def prepare(client: AsyncClient, workdir: Path, peer_crds: Path | None) -> None:
    """Everything a controller under comparison needs in the cluster (module docstring)."""
    await samples.install_crds(
        client, [*crds.all_documents(), *peer_crd_documents(peer_crds)], timeout=120
    )
    for ns in (CONTROLLER_NS, INFRA_NS, GATEWAY_NS, AITENANT_NS):
        await samples.ensure_namespace(client, ns)
    await samples.ensure_db_secret(client, INFRA_NS)
    with contextlib.suppress(ApiError):
        await client.create(
            cast(
                Deployment,
                Deployment.from_dict(
                    {
                        "metadata": {"name": "maas-controller", "namespace": CONTROLLER_NS},
                        "spec": {
                            "selector": {"matchLabels": {"app": "maas-controller"}},
                            "template": {
                                "metadata": {"labels": {"app": "maas-controller"}},
                                "spec": {
                                    "containers": [{"name": "manager", "image": images.PAUSE_IMAGE}]
                                },
                            },
                        },
                    },
                ),
            )
        )


def write_serving_cert(tmpdir: Path) -> Path:
    """A serving certificate for 127.0.0.1 in controller-runtime's default folder under
    ``tmpdir``; returns that folder, which also holds ``ca.crt``, the CA that signed it (for a
    webhook configuration's ``caBundle``)."""
    import trustme  # tests and benchmarks only

    folder = tmpdir / "k8s-webhook-server" / "serving-certs"
    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_pem.write_to_path(str(folder / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(folder / "tls.crt"))
    ca.cert_pem.write_to_path(str(folder / "ca.crt"))
    return folder


@dataclass
class ControllerUnderTest:
    """One controller, started from ``command`` with the peer environment (module docstring)."""

    name: str
    command: str
    kubeconfig: Path
    workdir: Path
    health_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}.log"

    @property
    def tmpdir(self) -> Path:
        """``TMPDIR`` of the command; ``write_serving_cert`` fills it at each start."""
        return self.workdir / f"{self.name}-tmp"

    def env(self) -> dict[str, str]:
        write_serving_cert(self.tmpdir)
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "TMPDIR": str(self.tmpdir),
            "HEALTH_PORT": str(self.health_port),
            "CONTROLLER_NAMESPACE": CONTROLLER_NS,
            "INFRA_NAMESPACE": INFRA_NS,
            "GATEWAY_NAMESPACE": GATEWAY_NS,
            "AITENANT_NAMESPACE": AITENANT_NS,
            "MAAS_API_IMAGE": images.maas_api_image(),
            "MAAS_API_CLEANUP_IMAGE": images.CLEANUP_IMAGE,
            "RELATED_IMAGE_ODH_MAAS_API_IMAGE": images.maas_api_image(),
            "RELATED_IMAGE_UBI_MINIMAL_IMAGE": images.CLEANUP_IMAGE,
        }

    def start(self) -> None:
        env = self.env()
        with self.log.open("ab") as out:
            self.started_at = time.time()
            self.proc = subprocess.Popen(
                ["bash", "-c", self.command],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    async def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not ready after {timeout:.0f} s")
            await asyncio.sleep(0.1)

    def pids(self) -> list[int]:
        """The command's live processes (its shell, and whatever that started, in one
        session)."""
        assert self.proc is not None
        return bench.session_pids(self.proc.pid)

    def cpu_seconds(self) -> float:
        """User + system CPU of the command's processes (and of children they waited for)."""
        return sum(_or_zero(bench.process_cpu_seconds, pid) for pid in self.pids())

    def peak_rss_mb(self) -> float:
        """The largest resident-memory high-water mark among the command's processes."""
        return max((_or_zero(bench.peak_rss_mb, pid) for pid in self.pids()), default=0.0)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)


def _or_zero(read: Callable[[int], float], pid: int) -> float:
    try:
        return read(pid)
    except OSError:  # the process is gone meanwhile
        return 0.0


async def port_free(port: int, timeout: float = 120) -> None:
    """Until nothing listens on ``port`` (the peer's webhook binds it on every interface;
    another test on this machine may hold it a while)."""
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go's listeners
            try:
                sock.bind(("", port))
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
        await asyncio.sleep(1)
