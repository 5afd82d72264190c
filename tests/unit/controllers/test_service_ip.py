"""``--maas-api-via-cluster-ip``: requests go to the Service's ClusterIP, TLS checks its name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from lightkube.models.core_v1 import ServiceSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Service

from aitenant.controllers.aitenant.service_ip import ServiceIPTransport
from aitenant.controllers.aitenant.setup import revocation_transport
from aitenant.settings import Settings


class Services:
    """A client that knows one Service."""

    def __init__(self, cluster_ip: str | None) -> None:
        self.cluster_ip = cluster_ip
        self.asked: list[tuple[str, str]] = []

    async def get(self, kind: Any, name: str, *, namespace: str) -> Service:
        assert kind is Service
        self.asked.append((namespace, name))
        if name != "maas-api-a":
            raise LookupError(name)
        return Service(
            metadata=ObjectMeta(name=name, namespace=namespace),
            spec=ServiceSpec(clusterIP=self.cluster_ip),
        )


async def test_a_service_name_is_sent_to_its_cluster_ip() -> None:
    services = Services("10.96.0.7")
    transport = ServiceIPTransport(services, None)  # type: ignore[arg-type]
    assert await transport.cluster_ip("maas-api-a.infra.svc") == "10.96.0.7"
    assert await transport.cluster_ip("maas-api-a.infra.svc.cluster.local") == "10.96.0.7"
    assert services.asked == [("infra", "maas-api-a"), ("infra", "maas-api-a")]


@pytest.mark.parametrize("host", ["example.com", "10.0.0.1", "maas-api-b.infra.svc"])
async def test_anything_else_is_not_routed(host: str) -> None:
    transport = ServiceIPTransport(Services("10.96.0.7"), None)  # type: ignore[arg-type]
    with pytest.raises(httpx.ConnectError):
        await transport.cluster_ip(host)


async def test_a_headless_service_is_not_routed() -> None:
    transport = ServiceIPTransport(Services("None"), None)  # type: ignore[arg-type]
    with pytest.raises(httpx.ConnectError, match="no ClusterIP"):
        await transport.cluster_ip("maas-api-a.infra.svc")


def test_only_the_flag_swaps_the_transport(tmp_path: Path) -> None:
    client: Any = Services("10.96.0.7")
    assert revocation_transport(Settings(), client) is None
    chosen = revocation_transport(Settings(maas_api_via_cluster_ip=True), client)
    assert isinstance(chosen, ServiceIPTransport)
