"""The README's first command: the controller on a local control plane with a sample tenant.

Brings up etcd + kube-apiserver + kube-controller-manager on loopback and, where
``AITENANT_NODE=1`` (``scripts/dev demo`` sets it), one node (devtools/node.py: a
kube-scheduler, containerd, a kubelet, CNI and kube-proxy) with the images the harness builds
(devtools/images.py); or, with ``--use-kubeconfig``, uses the cluster ``$KUBECONFIG`` points at
and starts no node. It installs the CRDs, starts ``aitenant-controller`` as a real process,
creates the seed example's Gateway and AITenant ``red-team``, and prints ``kubectl get
aitenants`` and the platform's pods; on the node, also a ``curl`` through the tenant's Gateway
(Traefik beside the node: devtools/demo_gateway.py) and its answer. The demo writes no status:
on the node, the tenant is Ready because the kubelet runs its maas-api pod (the stand-in image)
and reports it Ready. Without a node (``AITENANT_NODE=0``) nothing runs that pod, and on
another cluster its own kubelet does: the demo then shows what the tenant reports. Then it
keeps running until Ctrl-C (``--once`` to exit), and stops the node, removing what it made,
before the control plane.

The controller listens on loopback only, on ports picked free at start. If it exits, the demo
notices at once, prints its last log lines and what to do, and exits 1 (no traceback); so it
does when the node does not start, or the tenant on it is not Ready in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from lightkube import ApiError, AsyncClient, KubeConfig

from aitenant import contract
from aitenant.resources import AITenant
from devtools import demo_gateway, images, samples
from devtools.cluster import DEFAULT_CONTROLLERS, LocalCluster, free_port, kube_bin_dir
from devtools.gateway import TraefikGateway
from devtools.node import NODE_CONTROLLERS, NODE_IP, Node

GATEWAY_NS = "gateways"
INFRA_NS = "aitenant-system"
TENANT = "red-team"
LOG_LINES = 20
# Seconds for the controller's first status on the tenant (no node of ours runs its pod).
REPORT_TIMEOUT = 60.0
# A first pod start on the node: sandbox, CNI, then the startup and readiness probes
# (src/aitenant/templates/deployment.yaml.j2), as tests/e2e/test_platform_runs.py allows.
NODE_READY_TIMEOUT = 120.0
T = TypeVar("T")


class Runs(Enum):
    """Who runs the tenant's maas-api pod."""

    NODE = "the node the demo started"
    NOTHING = "nothing: no node runs on this control plane (AITENANT_NODE=0)"
    CLUSTER = "the kubelets of the cluster $KUBECONFIG points at"


@dataclass(frozen=True)
class PlatformImages:
    """``--maas-api-image`` and ``--maas-api-cleanup-image``."""

    maas_api: str
    cleanup: str


def node_images() -> PlatformImages:
    """What the node's containerd holds (devtools/images.py): the real maas-api when
    ``AITENANT_MAAS_API_IMAGE`` names one, else the stand-in."""
    return PlatformImages(images.maas_api_image(), images.CLEANUP_IMAGE)


class DemoFailed(Exception):
    """The demo cannot go on; the message says what happened and what to do."""


def node_wanted(env: Mapping[str, str], use_kubeconfig: bool) -> bool:
    """A node on the local control plane: where ``AITENANT_NODE=1``, never on another
    cluster."""
    return env.get("AITENANT_NODE") == "1" and not use_kubeconfig


def controller_command(
    kubeconfig: Path, ca_file: Path, ca_key_file: Path, platform: PlatformImages | None = None
) -> list[str]:
    """``aitenant-controller`` for the demo: every server on loopback, on free ports; the
    images ``platform`` names (else the controller's defaults)."""
    chosen = (
        []
        if platform is None
        else [
            f"--maas-api-image={platform.maas_api}",
            f"--maas-api-cleanup-image={platform.cleanup}",
        ]
    )
    return [
        sys.executable,
        "-m",
        "aitenant",
        "--kubeconfig",
        str(kubeconfig),
        "--gateway-namespace",
        GATEWAY_NS,
        "--controller-namespace",
        INFRA_NS,
        "--enable-tenant-namespace-discovery",
        "--manage-default-tenant=false",
        f"--maas-api-ca-file={ca_file}",
        f"--maas-api-ca-key-file={ca_key_file}",
        # On the host, outside the node's cluster DNS: key revocations go to maas-api's
        # Service at its ClusterIP (the node routes the Service range).
        "--maas-api-via-cluster-ip",
        "--webhook-port=0",
        "--bind-address=127.0.0.1",
        f"--metrics-port={free_port()}",
        f"--health-port={free_port()}",
        *chosen,
    ]


async def start_controller(command: Sequence[str], log_path: Path) -> asyncio.subprocess.Process:
    """Start the controller with its output appended to ``log_path``, in a session of its own:
    Ctrl-C reaches the demo, which stops it (``stop_controller``)."""
    with log_path.open("ab") as log:
        return await asyncio.create_subprocess_exec(
            *command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def last_lines(log_path: Path, count: int = LOG_LINES) -> str:
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return "  (no log)"
    return "\n".join(f"  {line}" for line in lines[-count:]) or "  (the log is empty)"


async def while_running(
    controller: asyncio.subprocess.Process, work: Awaitable[T], log_path: Path, what: str
) -> T:
    """``work``'s result, unless the controller exits first (DemoFailed at once)."""
    step = asyncio.ensure_future(work)
    exited = asyncio.ensure_future(controller.wait())
    try:
        await asyncio.wait({step, exited}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        exited.cancel()
    if step.done():
        try:
            return step.result()
        except (TimeoutError, OSError, ApiError) as exc:
            raise DemoFailed(
                f"{what} failed: {exc}\n\nThe controller's last log lines ({log_path}):\n"
                f"{last_lines(log_path)}\n\nWhat to do: look for an error above; if the "
                "controller looks stuck, run the demo again (`scripts/dev demo`)."
            ) from None
    step.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await step
    raise DemoFailed(
        f"The controller exited with code {controller.returncode} while the demo was "
        f"waiting for: {what}.\n\nIts last log lines ({log_path}):\n{last_lines(log_path)}\n\n"
        "What to do: fix what the log names (a flag, the cluster, a port in use), then run "
        "the demo again (`scripts/dev demo`)."
    )


def kubectl() -> str:
    """The kubectl built with the control plane (same version), else one on PATH."""
    built = kube_bin_dir() / "kubectl"
    if built.exists():
        return str(built)
    found = shutil.which("kubectl")
    if found:
        return found
    raise SystemExit("kubectl not found; run scripts/build-control-plane.sh")


def ready_condition(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The tenant's ``Ready`` condition, if the controller has reported one."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return dict(cond)
    return None


def describe(cond: Mapping[str, Any] | None) -> str:
    if cond is None:
        return "no Ready condition yet"
    return f"Ready={cond.get('status')} ({cond.get('reason')}: {cond.get('message')})"


async def wait_tenant(
    client: AsyncClient, timeout: float, *, until_ready: bool
) -> dict[str, Any] | None:
    """The tenant's Ready condition once it is True or, unless ``until_ready``, once the
    controller has reported any; after ``timeout``, the last one seen."""
    started = time.monotonic()
    cond: dict[str, Any] | None = None
    while time.monotonic() - started < timeout:
        obj = await client.get(AITenant, TENANT, namespace=contract.DEFAULT_AITENANT_NAMESPACE)
        cond = ready_condition(obj)
        if cond is not None and (cond.get("status") == "True" or not until_ready):
            return cond
        await asyncio.sleep(0.2)
    return cond


def kept_logs_dir() -> Path:
    """Where a demo on its own control plane leaves its logs when it stops, until the next."""
    return images.cache_dir() / "last-demo"


def keep_logs(workdir: Path, kept: Path) -> None:
    """Copy the run's logs (the controller's, the control plane's and the node's) to ``kept``,
    replacing the previous run's: the control plane's files go with it."""
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir(parents=True)
    controller_log = workdir / "controller.log"
    if controller_log.is_file():
        shutil.copy2(controller_log, kept / controller_log.name)
    if (workdir / "logs").is_dir():
        shutil.copytree(workdir / "logs", kept / "logs")


def hints(kubeconfig: Path, log_path: Path, node_logs: Path | None) -> str:
    """What to run next, each command with the kubeconfig it needs."""
    lines = [
        "Use the cluster with kubectl:",
        f"  export KUBECONFIG={kubeconfig} PATH={Path(kubectl()).parent}:$PATH",
        "  kubectl version",
        "  kubectl get ait -A",
        f"  kubectl describe aitenant {TENANT} -n {contract.DEFAULT_AITENANT_NAMESPACE}",
        f"  kubectl --kubeconfig {kubeconfig} get pods -n {INFRA_NS}",
        f"  kubectl get maastenantconfig,roles -n ai-tenant-{TENANT}",
        f"  kubectl get deploy,svc,secret,networkpolicy,cronjob,httproute,authpolicy "
        f"-n {INFRA_NS} -l maas.opendatahub.io/tenant-name={TENANT}",
        f"Controller log: {log_path}",
    ]
    if node_logs is not None:
        lines.append(f"Node logs (kubelet, containerd, kube-proxy, kube-scheduler): {node_logs}")
    return "\n".join(lines)


def outcome(cond: Mapping[str, Any] | None, seconds: float, runs: Runs) -> str:
    """One line on the tenant and who made it so (or why it is not Ready)."""
    if cond is not None and cond.get("status") == "True":
        why = " because its maas-api pod is Ready" if runs is not Runs.CLUSTER else ""
        return f"AITenant {TENANT} is Ready{why} ({seconds:.2f}s after it was created)."
    return (
        f"AITenant {TENANT} reports {describe(cond)}. Its maas-api pod is run by "
        f"{runs.value}; the demo writes no status, so the tenant is Ready only once that pod is."
    )


async def demo(
    kubeconfig: Path,
    workdir: Path,
    once: bool,
    runs: Runs = Runs.CLUSTER,
    platform: PlatformImages | None = None,
    node_logs: Path | None = None,
) -> int:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="aitenant-demo")
    await samples.install_crds(client)
    # As the charm does: the maas-api ClusterRole lets each tenant's maas-api read its Secret.
    await samples.apply_shipped_cluster_roles(client, "aitenant-demo")
    for ns in (GATEWAY_NS, INFRA_NS):
        await samples.ensure_namespace(client, ns)
    await samples.ensure_db_secret(client, INFRA_NS)
    ca_file, ca_key_file = samples.write_ca(workdir / "maas-api-ca")

    log_path = workdir / "controller.log"
    # On the node, a real Gateway in front of the tenant (devtools/demo_gateway.py).
    try:
        traefik = demo_gateway.start(kubeconfig, workdir) if runs is Runs.NODE else None
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        raise DemoFailed(f"the Gateway did not start: {exc}") from None
    controller = await start_controller(
        controller_command(kubeconfig, ca_file, ca_key_file, platform), log_path
    )
    try:
        cond, seconds = await while_running(
            controller,
            create_tenant(client, runs, traefik),
            log_path,
            f"AITenant {TENANT} to be Ready",
        )
        print(f"\n{outcome(cond, seconds, runs)}\n")
        subprocess.run([kubectl(), "version"], env=env, check=True)
        subprocess.run([kubectl(), "get", "aitenants", "-A"], env=env, check=True)
        subprocess.run(
            [kubectl(), "get", "pods", "-n", INFRA_NS, "-o", "wide"], env=env, check=True
        )
        if traefik is not None and not await demo_gateway.show(traefik, TENANT):
            raise DemoFailed(f"the tenant's Gateway did not answer (see {traefik.access_log})")
        print(f"\n{hints(kubeconfig, log_path, node_logs)}\n")
        if not once:
            print("Running; press Ctrl-C to stop the controller, the node and the control plane.")
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await while_running(controller, stop.wait(), log_path, "Ctrl-C")
        return 0
    finally:
        await stop_controller(controller)
        if traefik is not None:
            traefik.stop()
        await client.close()


async def create_tenant(
    client: AsyncClient, runs: Runs, traefik: TraefikGateway | None = None
) -> tuple[dict[str, Any] | None, float]:
    """The sample Gateway (``traefik``'s where given) and AITenant; its Ready condition (True
    on the node, else TimeoutError; elsewhere whatever the controller reports) and the seconds
    from the AITenant's creation to it."""
    # The controller creates the AITenant infrastructure namespace when it starts.
    await samples.wait_namespace(client, contract.DEFAULT_AITENANT_NAMESPACE, 60)
    if traefik is None:
        await samples.create_gateway(client, samples.gateway(TENANT, GATEWAY_NS))
    else:
        await demo_gateway.create_gateway(client, traefik, TENANT, GATEWAY_NS)
    created = time.monotonic()
    await samples.create_aitenant(
        client,
        samples.aitenant(
            TENANT,
            gateway_name=TENANT,
            oidc={
                "issuerUrl": "https://keycloak.example.com/realms/red-team",
                "clientId": "red-team-maas",
            },
        ),
    )
    if runs is Runs.NODE:
        cond = await wait_tenant(client, NODE_READY_TIMEOUT, until_ready=True)
        if cond is None or cond.get("status") != "True":
            raise TimeoutError(
                f"AITenant {TENANT} not Ready after {NODE_READY_TIMEOUT:.0f}s: {describe(cond)}"
            )
        return cond, time.monotonic() - created
    # Another cluster's kubelets may make it Ready in this time; with nothing to run the
    # pod, the controller's first report is all there will be.
    cond = await wait_tenant(client, REPORT_TIMEOUT, until_ready=runs is Runs.CLUSTER)
    return cond, time.monotonic() - created


async def stop_controller(controller: asyncio.subprocess.Process) -> None:
    if controller.returncode is not None:
        return
    controller.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(controller.wait(), 15)
    except TimeoutError:
        controller.kill()
        await controller.wait()


def run_demo(
    kubeconfig: Path,
    workdir: Path,
    once: bool,
    runs: Runs = Runs.CLUSTER,
    platform: PlatformImages | None = None,
    node_logs: Path | None = None,
) -> int:
    try:
        return asyncio.run(demo(kubeconfig, workdir, once, runs, platform, node_logs))
    except DemoFailed as failed:
        print(f"\ndemo: {failed}", file=sys.stderr)
        return 1


def stop_node(node: Node) -> None:
    """Stop the node with Ctrl-C and SIGTERM held off: a half-stopped node would leave its
    bridge, routes and nftables table behind (its stop is bounded by its own timeouts)."""
    held = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        print("Stopping the node (its pods, containerd, bridge aitnode0, routes, rules)...")
        node.stop()
    finally:
        for sig, previous in held.items():
            signal.signal(sig, previous)


def on_local_cluster(once: bool, with_node: bool) -> int:
    """The demo on a control plane of its own, with a node where ``with_node``."""
    controllers = NODE_CONTROLLERS if with_node else DEFAULT_CONTROLLERS
    # The real maas-api talks to the API server from its pod (docs/maas-api.md).
    reach = NODE_IP if with_node and images.runs_real_maas_api() else None
    with LocalCluster(controllers=controllers, pods_reach_at=reach) as cluster:
        assert cluster.workdir is not None
        print(f"Local control plane up at {cluster.server} (files in {cluster.workdir})")
        node = Node(cluster) if with_node else None
        try:
            if node is None:
                code = run_demo(cluster.kubeconfig, cluster.workdir, once, Runs.NOTHING)
            else:
                code = start_node(node)
                if code == 0:
                    code = run_demo(
                        cluster.kubeconfig,
                        cluster.workdir,
                        once,
                        Runs.NODE,
                        node_images(),
                        node.logs,
                    )
        finally:
            if node is not None:
                stop_node(node)
            kept = kept_logs_dir()
            keep_logs(cluster.workdir, kept)
        if not os.environ.get("AITENANT_KEEP_CLUSTER"):
            print(
                f"(The local control plane's files go now; the logs printed above are copied "
                f"to {kept}, the controller's as controller.log, the others under logs/, and "
                "kept there until the next demo. AITENANT_KEEP_CLUSTER=1 keeps every file.)",
                file=sys.stderr,
            )
    return code


def start_node(node: Node) -> int:
    """0 once the node is Ready with the images loaded, else 1 with what happened."""
    began = time.monotonic()
    print("Starting the node (kube-scheduler, containerd, kubelet, CNI, kube-proxy; images)...")
    try:
        node.start()
    except (RuntimeError, TimeoutError, OSError, subprocess.CalledProcessError) as exc:
        print(
            f"\ndemo: the node did not start: {exc}\n\nWhat to do: read its logs "
            f"({node.logs}, kept with AITENANT_KEEP_CLUSTER=1); if another node of ours runs "
            "on this machine, wait for it to stop; AITENANT_NODE=0 runs the demo without a "
            "node (the tenant then stays not Ready).",
            file=sys.stderr,
        )
        return 1
    print(f"Node up in {time.monotonic() - began:.1f}s")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--once", action="store_true", help="exit after showing the tenant")
    parser.add_argument(
        "--use-kubeconfig",
        action="store_true",
        help="use the cluster $KUBECONFIG points at instead of a local control plane",
    )
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # keep order with kubectl
    if args.use_kubeconfig:
        kubeconfig = Path(os.environ.get("KUBECONFIG", Path.home() / ".kube" / "config"))
        workdir = Path.cwd() / ".demo"
        workdir.mkdir(exist_ok=True)
        raise SystemExit(run_demo(kubeconfig, workdir, args.once, Runs.CLUSTER))
    try:
        code = on_local_cluster(args.once, node_wanted(os.environ, args.use_kubeconfig))
    except KeyboardInterrupt:
        code = 130
    raise SystemExit(code)


if __name__ == "__main__":
    main()
