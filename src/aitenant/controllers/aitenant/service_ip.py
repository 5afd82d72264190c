"""Calls to a tenant's maas-api from outside the cluster's DNS (``--maas-api-via-cluster-ip``).

A controller in a pod reaches ``<service>.<namespace>.svc`` through cluster DNS. One run on a
host of the cluster (the demo's, on our node) has no such resolver: this transport sends each
request to the Service's ClusterIP, read from the API, while TLS still checks the certificate
against the Service name, with the CA as the file holds it now (the charm rotates it in place).
"""

from __future__ import annotations

from pathlib import Path

import httpx
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Service

from aitenant.controllers.aitenant.revocation import maas_api_trust


class ServiceIPTransport(httpx.AsyncBaseTransport):
    def __init__(self, client: AsyncClient, ca_file: Path | None) -> None:
        self.client = client
        self.ca_file = ca_file

    async def cluster_ip(self, host: str) -> str:
        """The ClusterIP of the Service ``host`` names (``<service>.<namespace>.svc[...]``)."""
        parts = host.split(".")
        if len(parts) < 3 or parts[2] != "svc":
            raise httpx.ConnectError(f"{host} is not a Service name; nothing else is routed")
        try:
            service = await self.client.get(Service, parts[0], namespace=parts[1])
        except Exception as exc:  # any failure to read it is a failure to connect
            raise httpx.ConnectError(f"no Service for {host}: {exc}") from None
        address = service.spec.clusterIP if service.spec else None
        if not address or address == "None":
            raise httpx.ConnectError(f"Service {parts[1]}/{parts[0]} has no ClusterIP")
        return address

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        request.url = request.url.copy_with(host=await self.cluster_ip(host))
        request.extensions = {**request.extensions, "sni_hostname": host}
        async with httpx.AsyncHTTPTransport(verify=maas_api_trust(self.ca_file)) as transport:
            response = await transport.handle_async_request(request)
            await response.aread()
        return response
