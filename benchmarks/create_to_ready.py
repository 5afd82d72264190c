"""Create-to-Ready benchmark on the local control plane. Prints figures; never fails on a time.

1. 10 AITenants created one after another: create-to-Ready latency p50/p99.
2. 25 AITenants created at once: time until all are Ready.
3. API requests per tenant by verb (from the controller's own /metrics).
4. Writes and reads during a forced resync of every Active tenant (the controller is restarted,
   relists and reconciles all of them); the reads split into the informers' lists and discovery,
   which do not grow with the tenants, and GETs of single objects.
5. The controller's peak RSS (VmHWM of its process).
6. Restart: import time of the controller's modules, and process start to the first reconcile
   outcome (every tenant already exists).
7. Deletion of every tenant at once: time until all are gone, and API requests per tenant.

The API server's audit log breaks the controller's requests down by verb and resource (the
controller authenticates as its own user).

The controller renders each tenant's maas-api platform and reports its MaasTenantConfig Ready once
the Deployment is Available: the control plane has one node (devtools/node.py), where each
tenant's maas-api pod (the stand-in image) starts and turns Ready under a real kubelet, so
create-to-Ready includes that pod's start and its first passing probes (docs/platform.md §1).
The node places pods by their CPU requests (maas-api's are 50m): a 2-core machine holds some
38 tenants, hence the default sizes (``--sequential`` and ``--burst`` beyond that
leave the rest Pending, unscheduled). With ``--simulated-nodes [N]`` the pods run on N KWOK
nodes instead (devtools/kwok.py; the real node cordoned): no container starts, so
create-to-Ready then leaves out the pod's start and probes, and larger sizes fit.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from devtools import audit as audit_log
from devtools import bench, kwok, samples
from devtools.chaos import ControllerProcess, controller_args, wait_all
from devtools.cluster import User, free_port
from devtools.maas_api import FakeMaasApi
from devtools.node import cluster_with_node
from lightkube import AsyncClient, KubeConfig

from aitenant.resources import AITenant

GATEWAY_NS = "gateways"
INFRA_NS = "aitenant-system"
AITENANT_NS = "ai-tenants"
WRITES = ("CREATE", "UPDATE", "PATCH", "DELETE")
CONTROLLER_USER = User("bench-controller", "bench-controller-token", ("system:masters",))
OUTCOME = re.compile(r"^(\S+ \S+) \S+ aitenant\.controllers\.aitenant\.reconciler: aitenant \S+: ")


class Controller(ControllerProcess):
    """The controller process, with its /metrics scraped for request counts."""

    def __init__(
        self, kubeconfig: Path, log: Path, maas_api: FakeMaasApi, log_level: str = "warning"
    ) -> None:
        self.metrics_port = free_port()
        extra = [f"--metrics-port={self.metrics_port}", f"--log-level={log_level}"]
        # The fake maas-api answers the revocations of step 7; its CA issues the tenant
        # platform's serving certs (docs/differences.md D9).
        args = controller_args(
            gateway_ns=GATEWAY_NS, infra_ns=INFRA_NS, maas_api=maas_api, extra=extra
        )
        super().__init__(kubeconfig, log, args)

    def metrics(self) -> dict[str, float]:
        deadline = time.monotonic() + 120  # a loaded machine starts the process slowly
        while True:
            try:
                return bench.parse_metrics(bench.metrics_text(self.metrics_port))
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("metrics endpoint did not answer") from None
                time.sleep(0.1)


def reconciles(metrics: dict[str, float]) -> int:
    """AITenant reconcile passes finished."""
    return bench.reconciles_by_controller(metrics)["aitenant"]


def import_seconds(runs: int = 5) -> float:
    """Median wall time of importing the controller's entry module, minus a bare interpreter."""

    def wall(code: str) -> float:
        env = {**os.environ, **bench.controller_env()}
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        return time.perf_counter() - started

    bare = statistics.median(wall("pass") for _ in range(runs))
    return statistics.median(wall("import aitenant.__main__") for _ in range(runs)) - bare


async def first_reconcile_seconds(controller: Controller) -> float:
    """Start ``controller``; seconds from the process start to its first reconcile outcome."""
    log = controller.log
    offset = log.stat().st_size if log.exists() else 0
    started = time.time()
    controller.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with log.open() as lines:
            lines.seek(offset)
            for line in lines:
                if match := OUTCOME.match(line):
                    stamp = dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
                    return stamp.timestamp() - started
        await asyncio.sleep(0.05)
    raise TimeoutError("no reconcile outcome logged")


async def wait_ready(client: AsyncClient, names: set[str], timeout: float) -> dict[str, float]:
    """Return the monotonic time each tenant was first seen Ready (watching, not polling)."""
    seen: dict[str, float] = {}

    async def watch() -> None:
        async for _, obj in client.watch(AITenant, namespace=AITENANT_NS):
            name = obj["metadata"]["name"]
            conds = (obj.get("status") or {}).get("conditions") or []
            if (
                name in names
                and name not in seen
                and any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
            ):
                seen[name] = time.monotonic()
                if len(seen) == len(names):
                    return

    await asyncio.wait_for(watch(), timeout)
    return seen


async def run(sequential: int, burst: int, simulated_nodes: int) -> None:
    with (
        cluster_with_node(extra_users=[CONTROLLER_USER], audit=True) as cluster,
        kwok.simulated_nodes(cluster, simulated_nodes),
    ):
        print(kwok.describe(simulated_nodes), flush=True)
        assert cluster.workdir is not None
        client = AsyncClient(KubeConfig.from_file(cluster.kubeconfig), field_manager="bench")
        audit = audit_log.Audit(cluster.audit_log, CONTROLLER_USER.name)
        await samples.install_crds(client)
        for ns in (GATEWAY_NS, INFRA_NS):
            await samples.ensure_namespace(client, ns)
        await samples.ensure_db_secret(client, INFRA_NS)
        maas_api = FakeMaasApi(cluster.workdir / "maas-api")
        await maas_api.start()
        kubeconfig = cluster.kubeconfig_for(CONTROLLER_USER)
        controller = Controller(kubeconfig, cluster.workdir / "controller.log", maas_api)
        controller.start()
        try:
            controller.metrics()  # wait until it serves
            before_metrics = controller.metrics()
            before = bench.api_by_verb(before_metrics)
            audit.take()

            latencies = []
            for i in range(sequential):
                name = f"seq-{i}"
                await samples.create_gateway(client, samples.gateway(name, GATEWAY_NS))
                waiter = asyncio.create_task(wait_ready(client, {name}, 30))
                await asyncio.sleep(0)
                started = time.monotonic()
                await samples.create_aitenant(client, samples.aitenant(name, AITENANT_NS))
                ready_at = (await waiter)[name]
                latencies.append(ready_at - started)
            latencies.sort()
            p99 = bench.percentile(latencies, 0.99)
            print(
                f"sequential: {sequential} tenants, create-to-Ready p50 "
                f"{statistics.median(latencies) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
                f"max {latencies[-1] * 1000:.0f} ms"
            )
            bench.record("create_p50_ms", statistics.median(latencies) * 1000)
            bench.record("create_p99_ms", p99 * 1000)

            names = {f"burst-{i}" for i in range(burst)}
            await asyncio.gather(
                *(samples.create_gateway(client, samples.gateway(n, GATEWAY_NS)) for n in names)
            )
            waiter = asyncio.create_task(wait_ready(client, names, 300))
            await asyncio.sleep(0)
            started = time.monotonic()
            await asyncio.gather(
                *(samples.create_aitenant(client, samples.aitenant(n, AITENANT_NS)) for n in names)
            )
            seen = await waiter
            print(
                f"burst: {burst} tenants created at once, all Ready after "
                f"{max(seen.values()) - started:.1f} s"
            )
            bench.record("burst_s", max(seen.values()) - started)

            after_metrics = controller.metrics()
            total = sequential + burst
            per_tenant = bench.by_verb_per_tenant(before, bench.api_by_verb(after_metrics), total)
            print(f"API requests per tenant: {bench.verbs_line(per_tenant)}")
            passes = bench.reconciles_by_controller(after_metrics) - bench.reconciles_by_controller(
                before_metrics
            )
            print(
                "reconciles per tenant: "
                + ", ".join(f"{name} {n / total:.1f}" for name, n in sorted(passes.items()))
            )
            await asyncio.sleep(2)  # the audit log is written asynchronously
            created = audit.take()
            print(f"  by verb and resource (audit log): {audit_log.breakdown(created, total)}")
            bench.record("requests_per_tenant", bench.requests(per_tenant))
            print(f"controller peak RSS after {total} tenants: {controller.peak_rss_mb():.0f} MB")
            bench.record("peak_rss_mb", controller.peak_rss_mb())

            # Forced resync: restart; the new process relists and reconciles every tenant.
            controller.stop()
            controller.start()
            deadline = time.monotonic() + 120
            metrics = controller.metrics()
            while reconciles(metrics) < total and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                metrics = controller.metrics()
            await asyncio.sleep(1.0)
            metrics = controller.metrics()
            verbs = bench.api_by_verb(metrics)
            writes = sum(verbs.get(v, 0) for v in WRITES)
            await asyncio.sleep(2)  # the audit log is written in batches
            resync = audit.take()
            # A GET of one named object, as opposed to an informer's LIST or a discovery path.
            object_gets = sum(
                n for key, n in resync.items() if key.startswith("get ") and key[4] != "/"
            )
            print(
                f"resync of {total} Active tenants: {reconciles(metrics):.0f} reconciles, "
                f"{writes:.0f} writes, {verbs.get('GET', 0) / total:.2f} GETs per tenant "
                f"(lists and discovery included), {object_gets} GETs of single objects in all; "
                f"peak RSS {controller.peak_rss_mb():.0f} MB"
            )
            print(f"  by verb and resource (audit log): {audit_log.breakdown(resync, total)}")
            bench.record("resync_gets_per_tenant", verbs.get("GET", 0) / total)
            bench.record("resync_object_gets", object_gets)
            bench.record("resync_writes", writes)
            bench.record("resync_peak_rss_mb", controller.peak_rss_mb())

            # Restart to the first reconcile (logged at info level), every tenant existing.
            controller.stop()
            imports = import_seconds()
            firsts = []
            for i in range(3):
                probe = Controller(
                    kubeconfig, cluster.workdir / f"restart-{i}.log", maas_api, log_level="info"
                )
                try:
                    firsts.append(await first_reconcile_seconds(probe))
                finally:
                    probe.stop()
            print(
                f"restart: importing the controller takes {imports:.2f} s; process start to "
                f"first reconcile {statistics.median(firsts):.2f} s (median of 3, "
                f"{total} tenants)"
            )
            bench.record("import_s", imports)
            bench.record("start_to_first_reconcile_s", statistics.median(firsts))

            everyone = names | {f"seq-{i}" for i in range(sequential)}
            await delete_all(client, controller, audit, everyone)
        finally:
            controller.stop()
            await maas_api.stop()
            await client.close()


async def delete_all(
    client: AsyncClient, controller: Controller, audit: audit_log.Audit, names: set[str]
) -> None:
    """Step 7: a controller that has settled every tenant sees them all deleted at once."""
    controller.start()
    controller.metrics()  # wait until it serves
    await asyncio.to_thread(bench.wait_until_quiet, controller.metrics_port)
    before = bench.api_by_verb(controller.metrics())
    audit.take()
    started = time.monotonic()
    await asyncio.gather(*(client.delete(AITenant, n, namespace=AITENANT_NS) for n in names))
    await wait_all(client, AITENANT_NS, names, gone=True, timeout=600)
    took = time.monotonic() - started
    per_tenant = bench.by_verb_per_tenant(
        before, bench.api_by_verb(controller.metrics()), len(names)
    )
    print(
        f"deletion: {len(names)} tenants deleted at once, all gone after {took:.1f} s; "
        f"API requests per tenant: {bench.verbs_line(per_tenant)}"
    )
    await asyncio.sleep(2)  # the audit log is written in batches
    print(f"  by verb and resource (audit log): {audit_log.breakdown(audit.take(), len(names))}")
    bench.record("delete_all_s", took)
    bench.record("deletion_requests_per_tenant", bench.requests(per_tenant))
    bench.record("deletion_gets_per_tenant", per_tenant.get("GET", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sequential", type=int, default=10)
    parser.add_argument("--burst", type=int, default=25)
    kwok.add_simulated_nodes_argument(parser)
    args = parser.parse_args()
    asyncio.run(run(args.sequential, args.burst, args.simulated_nodes))


if __name__ == "__main__":
    main()
