"""The README's first command: the controller on a local control plane with a sample tenant.

Brings up etcd + kube-apiserver + kube-controller-manager on loopback (or, with
``--use-kubeconfig``, the cluster ``$KUBECONFIG`` points at), installs the CRDs, starts
``aitenant-controller`` as a real process, creates the seed example's Gateway and AITenant
``red-team``, and prints ``kubectl get aitenants``. The controller renders the tenant's maas-api
platform; with no kubelet to run it, the demo marks the maas-api Deployment Available as the
deployment controller would. Then it keeps running until Ctrl-C (``--once`` to exit).

The controller listens on loopback only, on ports picked free at start. If it exits, the demo
notices at once, prints its last log lines and what to do, and exits 1 (no traceback); so it
does when the tenant is not Ready in time.
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
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TypeVar

from lightkube import ApiError, AsyncClient, KubeConfig

from aitenant import contract
from aitenant.resources import AITenant
from tests.harness import samples
from tests.harness.cluster import LocalCluster, free_port, kube_bin_dir

GATEWAY_NS = "gateways"
INFRA_NS = "aitenant-system"
TENANT = "red-team"
LOG_LINES = 20
T = TypeVar("T")


class DemoFailed(Exception):
    """The demo cannot go on; the message says what happened and what to do."""


def controller_command(kubeconfig: Path, ca_file: Path, ca_key_file: Path) -> list[str]:
    """``aitenant-controller`` for the demo: every server on loopback, on free ports."""
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
        "--webhook-port=0",
        "--bind-address=127.0.0.1",
        f"--metrics-port={free_port()}",
        f"--health-port={free_port()}",
    ]


async def start_controller(command: Sequence[str], log_path: Path) -> asyncio.subprocess.Process:
    """Start the controller with its output appended to ``log_path``."""
    with log_path.open("ab") as log:
        return await asyncio.create_subprocess_exec(*command, stdout=log, stderr=subprocess.STDOUT)


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


async def wait_ready(client: AsyncClient, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        obj = await client.get(AITenant, TENANT, namespace=contract.DEFAULT_AITENANT_NAMESPACE)
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if cond["type"] == "Ready" and cond["status"] == "True":
                return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise TimeoutError(f"AITenant {TENANT} not Ready after {timeout}s")


async def demo(kubeconfig: Path, workdir: Path, once: bool) -> int:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    client = AsyncClient(KubeConfig.from_file(kubeconfig), field_manager="aitenant-demo")
    await samples.install_crds(client)
    for ns in (GATEWAY_NS, INFRA_NS):
        await samples.ensure_namespace(client, ns)
    await samples.ensure_db_secret(client, INFRA_NS)
    ca_file, ca_key_file = samples.write_ca(workdir / "maas-api-ca")

    log_path = workdir / "controller.log"
    controller = await start_controller(
        controller_command(kubeconfig, ca_file, ca_key_file), log_path
    )
    simulator = asyncio.create_task(samples.DeploymentAvailability(client).run())
    try:
        seconds = await while_running(
            controller, create_tenant(client), log_path, f"AITenant {TENANT} to be Ready"
        )
        print(f"\nAITenant {TENANT} is Ready ({seconds:.2f}s after it was created).\n")
        subprocess.run([kubectl(), "version"], env=env, check=True)
        subprocess.run([kubectl(), "get", "aitenants", "-A"], env=env, check=True)
        print(
            "\nUse the cluster with kubectl:\n"
            f"  export KUBECONFIG={kubeconfig} PATH={Path(kubectl()).parent}:$PATH\n"
            "  kubectl version\n"
            "  kubectl get ait -A\n"
            f"  kubectl describe aitenant {TENANT} -n {contract.DEFAULT_AITENANT_NAMESPACE}\n"
            f"  kubectl get maastenantconfig,roles -n ai-tenant-{TENANT}\n"
            f"  kubectl get deploy,svc,secret,networkpolicy,cronjob,httproute,authpolicy "
            f"-n {INFRA_NS} -l maas.opendatahub.io/tenant-name={TENANT}\n"
            f"Controller log: {log_path}\n"
        )
        if not once:
            print("Running; press Ctrl-C to stop the controller and the control plane.")
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await while_running(controller, stop.wait(), log_path, "Ctrl-C")
        return 0
    finally:
        simulator.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await simulator
        await stop_controller(controller)
        await client.close()


async def create_tenant(client: AsyncClient) -> float:
    """The sample Gateway and AITenant; seconds from its creation to Ready."""
    # The controller creates the AITenant infrastructure namespace when it starts.
    await samples.wait_namespace(client, contract.DEFAULT_AITENANT_NAMESPACE, 60)
    await samples.create_gateway(client, samples.gateway(TENANT, GATEWAY_NS))
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
    return await wait_ready(client, 60)


async def stop_controller(controller: asyncio.subprocess.Process) -> None:
    if controller.returncode is not None:
        return
    controller.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(controller.wait(), 15)
    except TimeoutError:
        controller.kill()
        await controller.wait()


def run_demo(kubeconfig: Path, workdir: Path, once: bool) -> int:
    try:
        return asyncio.run(demo(kubeconfig, workdir, once))
    except DemoFailed as failed:
        print(f"\ndemo: {failed}", file=sys.stderr)
        return 1


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
        raise SystemExit(run_demo(kubeconfig, workdir, args.once))
    with LocalCluster() as cluster:
        assert cluster.workdir is not None
        print(f"Local control plane up at {cluster.server} (files in {cluster.workdir})")
        code = run_demo(cluster.kubeconfig, cluster.workdir, args.once)
        if code and not os.environ.get("AITENANT_KEEP_CLUSTER"):
            print(
                "(The local control plane's files, the controller log among them, are removed "
                "now; AITENANT_KEEP_CLUSTER=1 keeps them.)",
                file=sys.stderr,
            )
    raise SystemExit(code)


if __name__ == "__main__":
    main()
