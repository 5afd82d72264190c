"""A real Gateway in front of the tenants (devtools/gateway.py): Traefik beside the session's
node, two Gateways of its class on two entry points, and a tenant on each, made once per
module. The module's controller stands in for the session's (as tests/e2e/controller/
test_platform_runs.py's does) with a maas-api CA of its own, so a test may rotate it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from devtools import samples
from devtools.cluster import LocalCluster
from devtools.gateway import TraefikGateway
from devtools.maas_api import FakeMaasApi
from lightkube import ApiError, AsyncClient

from aitenant.resources import AITenant

from ..controller.maas_api_pods import (
    POD_READY_TIMEOUT,
    ServiceAddresses,
    start_controller,
    tenant_gone,
)
from ..harness import AITENANT_NS, GATEWAY_NS, RunningController
from ..tenants import wait_phase

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Site:
    """A tenant, its Gateway (of the same name) and where that Gateway is served."""

    tenant: str
    entry_point: str
    hostname: str
    # The label the Gateway's listener admits routes by; the controller puts it on the infra
    # namespace (docs/platform.md §5).
    selector: dict[str, str]


SITE_A = Site("gwreq-a", "gw-a", "a.gateway.test", {"aitenant.test/gateway-a": "routes"})
SITE_B = Site("gwreq-b", "gw-b", "b.gateway.test", {"aitenant.test/gateway-b": "routes"})


@dataclass
class GatewayRun:
    traefik: TraefikGateway
    controller: RunningController
    transport: ServiceAddresses
    ca_file: Path
    ca_key_file: Path

    async def restart_controller(self) -> None:
        await self.controller.stop()
        await self.controller.start()


async def make_site(kube: AsyncClient, traefik: TraefikGateway, site: Site) -> None:
    secret = f"{site.tenant}-tls"
    traefik.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps(traefik.serving_secret(secret, GATEWAY_NS, site.hostname)),
    )
    body = traefik.gateway(
        site.tenant,
        GATEWAY_NS,
        entry_point=site.entry_point,
        hostname=site.hostname,
        secret=secret,
        selector=site.selector,
    )
    await samples.create_gateway(kube, body)
    await samples.create_aitenant(
        kube, samples.aitenant(site.tenant, AITENANT_NS, gateway_name=site.tenant)
    )


@pytest.fixture(scope="module")
async def gateway_run(
    cluster: LocalCluster,
    kube: AsyncClient,
    controller: RunningController,
    maas_api: FakeMaasApi,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[GatewayRun]:
    ca_file, ca_key_file = samples.write_ca(tmp_path_factory.mktemp("gateway-ca"))
    await controller.stop()
    running, transport = await start_controller(
        cluster, kube, maas_api, maas_api_ca_file=ca_file, maas_api_ca_key_file=ca_key_file
    )
    assert cluster.workdir is not None
    traefik = TraefikGateway(
        cluster.kubeconfig, cluster.workdir, (SITE_A.entry_point, SITE_B.entry_point)
    )
    try:
        await asyncio.to_thread(traefik.start)
        log.warning("traefik serving %s; access log %s", traefik.ports, traefik.access_log)
        for site in (SITE_A, SITE_B):
            await make_site(kube, traefik, site)
        for site in (SITE_A, SITE_B):
            await wait_phase(kube, site.tenant, "Active", timeout=POD_READY_TIMEOUT)
        yield GatewayRun(traefik, running, transport, ca_file, ca_key_file)
    finally:
        # Deleted through the module's controller, which can still reach their maas-api.
        for site in (SITE_A, SITE_B):
            with contextlib.suppress(ApiError):
                await kube.delete(AITenant, site.tenant, namespace=AITENANT_NS)
        for site in (SITE_A, SITE_B):
            with contextlib.suppress(AssertionError):
                await tenant_gone(kube, site.tenant)
        traefik.stop()
        await running.stop()
        await transport.aclose()
        await controller.start()
