"""Short chaos variants: the controller converges whatever happens to it, under
faults. The long variants with 100 tenants are in benchmarks/chaos.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from devtools.chaos import ControllerProcess, Report, controller_args, run_scenario
from devtools.cluster import LocalCluster
from devtools.faults import FaultPlan, FaultProxy
from devtools.maas_api import FakeMaasApi
from lightkube import AsyncClient

from ..harness import (
    AITENANT_NS,
    CONTROLLER_USER,
    GATEWAY_NS,
    INFRA_NS,
    RunningController,
    controller_kubeconfig,
)

pytestmark = pytest.mark.e2e

Scenario = Callable[..., ControllerProcess]


@pytest.fixture
async def own_controller(
    cluster: LocalCluster, controller: RunningController, maas_api: FakeMaasApi
) -> AsyncIterator[Scenario]:
    """Replace the in-process session controller by a killable controller process."""
    await controller.stop()
    started: list[ControllerProcess] = []

    def start(kubeconfig: object = None, extra: tuple[str, ...] = ()) -> ControllerProcess:
        assert cluster.workdir is not None
        proc = ControllerProcess(
            kubeconfig=kubeconfig or controller_kubeconfig(cluster),  # type: ignore[arg-type]
            log=cluster.workdir / f"chaos-controller-{len(started)}.log",
            args=controller_args(
                gateway_ns=GATEWAY_NS, infra_ns=INFRA_NS, maas_api=maas_api, extra=extra
            ),
        )
        proc.start()
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            proc.stop()
        await controller.start()


def check(report: Report) -> None:
    print(report.line())
    assert report.leftovers == []
    assert report.repeats_that_revoked_keys == 0


async def run_in_suite(
    kube: AsyncClient, maas_api: FakeMaasApi, controller: ControllerProcess, **scenario: Any
) -> Report:
    """``run_scenario`` in the suite's namespaces, with the suite's time limit."""
    return await run_scenario(
        client=kube,
        controller=controller,
        maas_api=maas_api,
        aitenant_ns=AITENANT_NS,
        gateway_ns=GATEWAY_NS,
        infra_ns=INFRA_NS,
        timeout=240,
        **scenario,
    )


async def test_sigkilled_controller_converges(
    kube: AsyncClient, maas_api: FakeMaasApi, own_controller: Scenario
) -> None:
    controller = own_controller()
    report = await run_in_suite(
        kube,
        maas_api,
        controller,
        name="kill",
        tenants=25,
        prefix="chaos-kill",
        # At least every 3 s over a run of 10 s or more: kills land in both phases. (Much
        # more often and a process, 1.2 s to import, barely lives past its start.)
        kill_interval=(1.0, 3.0),
    )
    check(report)
    assert report.restarts >= 2, "the scenario must really have killed the controller"


async def test_api_faults_and_cut_watches_converge(
    cluster: LocalCluster, kube: AsyncClient, maas_api: FakeMaasApi, own_controller: Scenario
) -> None:
    assert cluster.workdir is not None
    proxy = FaultProxy(
        upstream=cluster.server,
        workdir=cluster.workdir / "proxy",
        # The rates of the long variant (benchmarks/chaos.py), plus up to 20 ms per request.
        plan=FaultPlan(error_rate=0.1, conflict_rate=0.05, max_delay=0.02, watch_cut_after=3.0),
    )
    await proxy.start()
    try:
        kubeconfig = proxy.kubeconfig(CONTROLLER_USER.token, cluster.workdir / "kubeconfig-proxy")
        controller = own_controller(kubeconfig)
        report = await run_in_suite(
            kube,
            maas_api,
            controller,
            name="api-faults",
            tenants=15,
            prefix="chaos-api",
            faults=proxy.injected,
        )
    finally:
        await proxy.stop()
    check(report)
    assert proxy.injected["409"] > 0
    assert proxy.injected["watch-cut"] > 0
    assert sum(proxy.injected[c] for c in ("500", "503", "429")) > 0


async def test_maas_api_outage_blocks_then_completes(
    kube: AsyncClient, maas_api: FakeMaasApi, own_controller: Scenario
) -> None:
    controller = own_controller()
    report = await run_in_suite(
        kube,
        maas_api,
        controller,
        name="maas-api-down",
        tenants=8,
        prefix="chaos-down",
        maas_api_outage=8.0,
    )
    check(report)
    assert report.delete_seconds >= 8.0
    log = controller.log.read_text()
    assert "API key revocation via DELETE" in log
    assert "HTTP 503" in log
