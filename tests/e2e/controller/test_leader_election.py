"""Two controller processes with --leader-elect: one reconciles; killing it hands over."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from devtools import images, samples
from devtools.cluster import LocalCluster
from devtools.maas_api import FakeMaasApi
from lightkube import AsyncClient
from lightkube.resources.coordination_v1 import Lease

from ..harness import AITENANT_NS, GATEWAY_NS, INFRA_NS, RunningController, controller_kubeconfig
from ..tenants import Names, wait_phase

pytestmark = pytest.mark.e2e

LEASE, RENEW, RETRY = 3.0, 2.0, 0.5


class Replica:
    def __init__(self, cluster: LocalCluster, name: str, maas_api: FakeMaasApi) -> None:
        assert cluster.workdir is not None
        self.name = name
        self.log = cluster.workdir / f"replica-{name}.log"
        env = {**os.environ, "POD_NAME": name}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "aitenant",
                    "--kubeconfig", str(controller_kubeconfig(cluster)),
                    "--gateway-namespace", GATEWAY_NS,
                    "--controller-namespace", INFRA_NS,
                    "--enable-tenant-namespace-discovery",
                    "--manage-default-tenant=false",
                    f"--maas-api-ca-file={maas_api.ca_file}",
                    f"--maas-api-ca-key-file={maas_api.ca_key_file}",
                    f"--maas-api-url-template={maas_api.url_template}",
                    "--webhook-port=0", "--metrics-port=0", "--health-port=0",
                    "--leader-elect",
                    f"--leader-elect-lease-duration={LEASE}s",
                    f"--leader-elect-renew-deadline={RENEW}s",
                    f"--leader-elect-retry-period={RETRY}s",
                    "--log-level=info",
                    *images.controller_flags(),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )  # fmt: skip

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)

    def reconciled(self, tenant: str) -> bool:
        return f"aitenant {AITENANT_NS}/{tenant}:" in Path(self.log).read_text()


async def holder(kube: AsyncClient) -> str:
    lease = await kube.get(Lease, "aitenant-controller", namespace=INFRA_NS)
    return (lease.spec.holderIdentity if lease.spec else None) or ""


@pytest.fixture
async def replicas(
    cluster: LocalCluster, kube: AsyncClient, controller: RunningController, maas_api: FakeMaasApi
) -> AsyncIterator[dict[str, Replica]]:
    await controller.stop()  # the session controller does not take part in the election
    started = {name: Replica(cluster, name, maas_api) for name in ("replica-a", "replica-b")}
    try:
        yield started
    finally:
        for replica in started.values():
            replica.stop()
        await controller.start()


async def wait_holder(kube: AsyncClient, not_: str = "", timeout: float = 20) -> tuple[str, float]:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            current = await holder(kube)
        except Exception:
            current = ""
        if current and not current.startswith(not_ or "\0"):
            return current, time.monotonic() - started
        await asyncio.sleep(0.05)
    raise AssertionError("no replica took the Lease")


async def test_leader_failover_after_sigkill(
    kube: AsyncClient, replicas: dict[str, Replica], unique: Names
) -> None:
    leader_id, _ = await wait_holder(kube)
    leader = next(r for name, r in replicas.items() if leader_id.startswith(name))
    standby = next(r for r in replicas.values() if r is not leader)

    first = unique("led")
    await samples.create_gateway(kube, samples.gateway(first, GATEWAY_NS))
    await samples.create_aitenant(kube, samples.aitenant(first, AITENANT_NS))
    await wait_phase(kube, first, "Active")
    assert leader.reconciled(first)
    assert not standby.reconciled(first), "a standby replica must not reconcile"

    killed_at = time.monotonic()
    os.kill(leader.proc.pid, signal.SIGKILL)
    new_id, _ = await wait_holder(kube, not_=leader.name, timeout=LEASE + RETRY + 10)
    handover = time.monotonic() - killed_at
    assert new_id.startswith(standby.name)
    # Lease duration + retry period, plus the time the standby's poll takes to land.
    assert handover <= LEASE + RETRY + 2.0, f"handover took {handover:.1f}s"

    second = unique("failover")
    await samples.create_gateway(kube, samples.gateway(second, GATEWAY_NS))
    await samples.create_aitenant(kube, samples.aitenant(second, AITENANT_NS))
    await wait_phase(kube, second, "Active")
    assert standby.reconciled(second)
