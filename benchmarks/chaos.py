"""The long chaos scenarios (the e2e suite runs short variants). Prints one line per scenario.

1. 100 tenants created and deleted while the controller is SIGKILLed at random moments.
2. The same behind a fault proxy: 10 % 5xx/429, 5 % 409 on writes, watches cut every ~3 s.
3. Two replicas with --leader-elect: the leader is SIGKILLed; hand-over time, and whether any
   tenant was reconciled by both replicas at overlapping times (from their logs and the Lease).
4. maas-api down for 60 s while 20 tenants are deleted.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import re
import time
from pathlib import Path
from typing import Any

from devtools import bench, samples
from devtools.chaos import ControllerProcess, controller_args, run_scenario
from devtools.cluster import ADMIN_TOKEN, LocalCluster
from devtools.faults import FaultPlan, FaultProxy
from devtools.maas_api import FakeMaasApi
from devtools.node import cluster_with_node
from lightkube import AsyncClient, KubeConfig
from lightkube.resources.coordination_v1 import Lease

AITENANT_NS, GATEWAY_NS, INFRA_NS = "ai-tenants", "gateways", "aitenant-system"
LOG_LINE = re.compile(
    r"^(\S+ \S+) \S+ aitenant\.controllers\.aitenant\.reconciler: aitenant (\S+):"
)


def reconcile_times(log: Path) -> dict[str, list[dt.datetime]]:
    """Tenant → timestamps of its reconcile outcome lines in one replica's log."""
    seen: dict[str, list[dt.datetime]] = {}
    for line in log.read_text().splitlines():
        if match := LOG_LINE.match(line):
            stamp = dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
            seen.setdefault(match.group(2), []).append(stamp)
    return seen


async def leader_scenario(
    cluster: LocalCluster, client: AsyncClient, maas_api: FakeMaasApi, tenants: int
) -> str:
    assert cluster.workdir is not None
    timing = [
        "--leader-elect",
        "--leader-elect-lease-duration=6s",
        "--leader-elect-renew-deadline=4s",
        "--leader-elect-retry-period=1s",
    ]
    args = controller_args(
        gateway_ns=GATEWAY_NS, infra_ns=INFRA_NS, maas_api=maas_api, extra=timing
    )
    replicas = [
        ControllerProcess(
            cluster.kubeconfig, cluster.workdir / f"replica-{i}.log", args, {"POD_NAME": f"r{i}"}
        )
        for i in range(2)
    ]
    for replica in replicas:
        replica.start()
    try:

        async def holder() -> str:
            lease = await client.get(Lease, "aitenant-controller", namespace=INFRA_NS)
            return (lease.spec.holderIdentity if lease.spec else None) or ""

        while not await _safe(holder):
            await asyncio.sleep(0.1)
        first = await holder()
        leader = replicas[0] if first.startswith("r0") else replicas[1]
        names = [f"lead-{i}" for i in range(tenants)]
        for name in names:
            await samples.create_gateway(client, samples.gateway(name, GATEWAY_NS))
            await samples.create_aitenant(client, samples.aitenant(name, AITENANT_NS))
        await asyncio.sleep(2)
        killed = time.monotonic()
        leader.kill()
        while (current := await _safe(holder)) in ("", first):
            await asyncio.sleep(0.05)
        handover = time.monotonic() - killed
        more = [f"lead-after-{i}" for i in range(tenants)]
        for name in more:
            await samples.create_gateway(client, samples.gateway(name, GATEWAY_NS))
            await samples.create_aitenant(client, samples.aitenant(name, AITENANT_NS))
        await asyncio.sleep(5)
        old = reconcile_times(leader.log)
        new = reconcile_times(next(r for r in replicas if r is not leader).log)
        last_old = max((t for ts in old.values() for t in ts), default=None)
        first_new = min((t for ts in new.values() for t in ts), default=None)
        overlap = last_old is not None and first_new is not None and first_new <= last_old
        return (
            f"leader failover: {2 * tenants} tenants; leader SIGKILLed; Lease moved to "
            f"{current} after {handover:.1f} s (lease 6 s + retry 1 s); reconciles by the old "
            f"leader {sum(map(len, old.values()))}, by the new one {sum(map(len, new.values()))};"
            f" overlapping reconcile periods: {'yes' if overlap else 'none'}"
        )
    finally:
        for replica in replicas:
            replica.stop()


async def _safe(fn):  # type: ignore[no-untyped-def]
    try:
        return await fn()
    except Exception:
        return ""


async def run(tenants: int, outage: float, scenarios: set[int]) -> None:
    with cluster_with_node(audit=True) as cluster:
        assert cluster.workdir is not None
        client = AsyncClient(KubeConfig.from_file(cluster.kubeconfig), field_manager="bench")
        await samples.install_crds(client)
        for ns in (GATEWAY_NS, INFRA_NS, AITENANT_NS):
            await samples.ensure_namespace(client, ns)
        prepare = getattr(samples, "ensure_db_secret", None)
        if prepare is not None:
            await prepare(client, INFRA_NS)
        maas_api = FakeMaasApi(cluster.workdir / "maas-api")
        await maas_api.start()
        common = {
            "client": client,
            "maas_api": maas_api,
            "aitenant_ns": AITENANT_NS,
            "gateway_ns": GATEWAY_NS,
            "infra_ns": INFRA_NS,
            "timeout": 900.0,
        }
        args = controller_args(gateway_ns=GATEWAY_NS, infra_ns=INFRA_NS, maas_api=maas_api)
        try:
            if 1 in scenarios:
                controller = ControllerProcess(cluster.kubeconfig, cluster.workdir / "c1.log", args)
                controller.start()
                try:
                    report = await run_scenario(
                        name="1 SIGKILL", controller=controller, tenants=tenants, prefix="kill",
                        kill_interval=(2.0, 6.0), **common,
                    )  # fmt: skip
                finally:
                    controller.stop()
                print(report.line(), flush=True)
            if 2 in scenarios:
                await faults_scenario(cluster, args, tenants, common)
            if 3 in scenarios:
                print(await leader_scenario(cluster, client, maas_api, 10), flush=True)
            if 4 in scenarios:
                controller = ControllerProcess(cluster.kubeconfig, cluster.workdir / "c4.log", args)
                controller.start()
                try:
                    report = await run_scenario(
                        name=f"4 maas-api down {outage:.0f} s", controller=controller,
                        tenants=20, prefix="outage", maas_api_outage=outage, **common,
                    )  # fmt: skip
                finally:
                    controller.stop()
                print(report.line(), flush=True)
        finally:
            await maas_api.stop()
            await client.close()


async def faults_scenario(
    cluster: LocalCluster, args: list[str], tenants: int, common: dict[str, Any]
) -> None:
    """Scenario 2: scenario 1 with the controller talking to the API through the fault proxy."""
    assert cluster.workdir is not None
    proxy = FaultProxy(
        cluster.server,
        cluster.workdir / "proxy",
        plan=FaultPlan(error_rate=0.1, conflict_rate=0.05, watch_cut_after=3.0),
    )
    await proxy.start()
    try:
        kubeconfig = proxy.kubeconfig(ADMIN_TOKEN, cluster.workdir / "kubeconfig-proxy")
        controller = ControllerProcess(kubeconfig, cluster.workdir / "c2.log", args)
        controller.start()
        try:
            report = await run_scenario(
                name="2 SIGKILL + API faults", controller=controller, tenants=tenants,
                prefix="faults", kill_interval=(2.0, 6.0), faults=proxy.injected,
                on_all_active=lambda seconds: bench.record("chaos2_active_s", seconds),
                **common,
            )  # fmt: skip
        finally:
            controller.stop()  # also when the scenario timed out: no controller outlives it
    finally:
        await proxy.stop()
    print(report.line(), flush=True)
    bench.record("chaos2_restarts", report.restarts)
    bench.record("chaos2_leftovers", len(report.leftovers))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--outage", type=float, default=60.0)
    parser.add_argument(
        "--scenarios", default="1,2,3,4", help="comma-separated scenario numbers to run"
    )
    args = parser.parse_args()
    scenarios = {int(n) for n in args.scenarios.split(",")}
    asyncio.run(run(args.tenants, args.outage, scenarios))


if __name__ == "__main__":
    main()
