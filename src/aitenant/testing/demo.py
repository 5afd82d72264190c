"""The README's first command: the controller on a local control plane with a sample tenant.

Brings up etcd + kube-apiserver + kube-controller-manager on loopback (or, with
``--use-kubeconfig``, the cluster ``$KUBECONFIG`` points at), installs the CRDs, starts
``aitenant-controller`` as a real process, creates the seed example's Gateway and AITenant
``red-team``, and prints ``kubectl get aitenants``. The controller renders the tenant's maas-api
platform; with no kubelet to run it, the demo marks the maas-api Deployment Available as the
deployment controller would. Then it keeps running until Ctrl-C (``--once`` to exit).
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
from pathlib import Path

from lightkube import AsyncClient, KubeConfig

from aitenant import contract
from aitenant.resources import AITenant
from aitenant.testing import samples
from aitenant.testing.cluster import LocalCluster, kube_bin_dir

GATEWAY_NS = "gateways"
INFRA_NS = "aitenant-system"
TENANT = "red-team"


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found:
        return found
    built = kube_bin_dir() / "kubectl"
    if built.exists():
        return str(built)
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
    await samples.install_crds(client, [samples.MANIFESTS / "crds", samples.TEST_CRDS])
    for ns in (GATEWAY_NS, INFRA_NS):
        await samples.ensure_namespace(client, ns)
    await samples.ensure_db_secret(client, INFRA_NS)
    ca_file, ca_key_file = samples.write_ca(workdir / "maas-api-ca")

    log_path = workdir / "controller.log"
    with log_path.open("ab") as log:
        controller = subprocess.Popen(
            [
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
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    simulator = asyncio.create_task(samples.DeploymentAvailability(client).run())
    try:
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
        seconds = await wait_ready(client, 60)
        print(f"\nAITenant {TENANT} is Ready ({seconds:.2f}s after it was created).\n")
        subprocess.run([kubectl(), "get", "aitenants", "-A"], env=env, check=True)
        print(
            "\nUse the cluster with kubectl:\n"
            f"  export KUBECONFIG={kubeconfig}\n"
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
            await stop.wait()
        return 0
    finally:
        simulator.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await simulator
        controller.send_signal(signal.SIGTERM)
        try:
            controller.wait(timeout=15)
        except subprocess.TimeoutExpired:
            controller.kill()
        await client.close()


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
        raise SystemExit(asyncio.run(demo(kubeconfig, workdir, args.once)))
    with LocalCluster() as cluster:
        assert cluster.workdir is not None
        print(f"Local control plane up at {cluster.server} (files in {cluster.workdir})")
        code = asyncio.run(demo(cluster.kubeconfig, cluster.workdir, args.once))
    raise SystemExit(code)


if __name__ == "__main__":
    main()
