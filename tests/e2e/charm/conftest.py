"""Fixtures for the deployed charm's tests: a control plane, and the charm deployed on it.

Both are module-scoped: each test module that asks for ``deployment`` gets its own control
plane, charm and controller (charm_deployment.py says how they are put together).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from devtools import crds, samples
from devtools.cluster import LocalCluster
from lightkube import AsyncClient, KubeConfig

from aitenant_charm.workload import CONTAINER

from ..harness import eventually
from .charm_deployment import AITENANT_NS, APP_USER, MODEL, Deployment, expose_webhook
from .charm_harness import CharmThread, PlannedController, relate_maas_api


@pytest.fixture(scope="module")
def ca_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(extra_users=[APP_USER], aggregator_routing=True) as local:
        yield local


@pytest.fixture(scope="module")
async def deployment(ca_cluster: LocalCluster) -> AsyncIterator[Deployment]:
    kube = AsyncClient(KubeConfig.from_file(ca_cluster.kubeconfig), field_manager="tests")
    # The gateway namespace exists wherever a Gateway is deployed; the charm applies a Role there.
    for namespace in (MODEL, AITENANT_NS, "gateways"):
        await samples.ensure_namespace(kube, namespace)
    await samples.install_crds(kube, crds.third_party_and_stand_ins())
    await expose_webhook(kube)
    assert ca_cluster.workdir is not None
    async with CharmThread(ca_cluster.kubeconfig, MODEL).begun() as charm_thread:

        def deploy() -> None:
            harness = charm_thread.harness
            harness.update_config(
                {"gateway-namespace": "gateways", "gateway-name": "maas-default-gateway"}
            )
            relate_maas_api(harness, MODEL)
            harness.container_pebble_ready(CONTAINER)

        await charm_thread.run(deploy)
        controller = PlannedController(
            charm_thread,
            ca_cluster.kubeconfig_for(APP_USER),
            ca_cluster.workdir / "controller.log",
        )
        await controller.start()
        await eventually(controller.ready, timeout=60, interval=0.2)
        try:
            with controller.stopped_with_pebble():
                yield Deployment(charm_thread, controller, kube)
        finally:
            await controller.stop()
            await kube.close()
