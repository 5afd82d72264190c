"""The charm deployed on a real API server, as the tests in this folder drive it.

The charm runs under Harness with a lightkube client on the module's own control plane, whose
API server resolves the charm's Service-referenced webhook through the Service's endpoints (as
a cluster network would: Endpoints up to 1.32, EndpointSlices since 1.33) and verifies the
serving certificate against the published caBundle for ``<app>.<model>.svc``. The controller is
the command the charm planned for Pebble, run as a process under the app's service account.

Here: the model, the AITenant namespace and the app's service account; ``Deployment`` (the
charm's thread, the planned controller and a client, with the hook runner and the webhook
certificate readers); ``expose_webhook``, what Juju and the cluster network provide. The
``ca_cluster`` and ``deployment`` fixtures (one per test module) are in conftest.py.
"""

from __future__ import annotations

import asyncio
import base64
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devtools.cluster import User
from lightkube import AsyncClient
from lightkube.models import core_v1, discovery_v1
from lightkube.models.core_v1 import ServicePort, ServiceSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.core_v1 import Endpoints, Service
from lightkube.resources.discovery_v1 import EndpointSlice
from ops import testing

from aitenant_charm import pki, webhook_trust
from aitenant_charm.cluster_manifests import cluster_scoped_name
from aitenant_charm.workload import WEBHOOK_PORT
from charm import AITenantCharm

from .charm_harness import APP, CharmThread, PlannedController

MODEL = "aitenant-model"  # the model's namespace, where Juju puts the app's Service
AITENANT_NS = "ai-tenants"  # the charm's default `aitenant-namespace`
# The app's service account: the controller runs as it; the charm binds its ClusterRole.
APP_USER = User(
    f"system:serviceaccount:{MODEL}:{APP}",
    "aitenant-app-token",
    ("system:serviceaccounts", f"system:serviceaccounts:{MODEL}"),
)


def host_address() -> str:
    """An address of this machine other than loopback (the API server refuses loopback
    endpoints). Connecting a UDP socket sends nothing; it only picks the interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))
        address = probe.getsockname()[0]
    assert not address.startswith("127."), "this test needs a non-loopback IPv4 address"
    return address


def bundle_of(vwc: ValidatingWebhookConfiguration) -> str:
    """The PEM caBundle of the (first) webhook."""
    webhooks = vwc.webhooks or []
    return base64.b64decode(webhooks[0].clientConfig.caBundle or "").decode() if webhooks else ""


@dataclass
class Deployment:
    charm: CharmThread
    controller: PlannedController
    kube: AsyncClient

    @property
    def harness(self) -> testing.Harness[AITenantCharm]:
        return self.charm.harness

    async def hook(self, fire: Callable[[], Any]) -> None:
        """Run one Juju event in the charm's thread (the charm may wait on the workload
        meanwhile), then let 'Pebble' apply the plan."""
        await self.charm.run(fire)
        await self.controller.sync()

    async def pushed_tls(self) -> tuple[str, str]:
        """The certificate the charm wrote for the workload, and its CA bundle."""

        def read() -> tuple[str, str]:
            tls = self.harness.charm._webhook_tls()  # pyright: ignore[reportPrivateUsage]
            assert tls is not None
            return tls.cert_pem, tls.ca_bundle_pem

        return await self.charm.run(read)

    async def published_bundle(self) -> str:
        name = cluster_scoped_name(APP, MODEL)
        return bundle_of(await self.kube.get(ValidatingWebhookConfiguration, name))

    async def settled(self) -> bool:
        """The workload serves the charm's certificate and caBundle holds only its CA(s)."""
        cert, bundle = await self.pushed_tls()
        served = await asyncio.to_thread(
            webhook_trust.served_certificate, "127.0.0.1", WEBHOOK_PORT
        )
        if served is None or not pki.same_certificate(served, cert):
            return False
        published = await self.published_bundle()
        if published.strip() == bundle.strip():
            return True
        # The hook stopped waiting before the reload: a later event drops the old CA.
        await self.hook(self.harness.charm.on.update_status.emit)
        return False


async def expose_webhook(kube: AsyncClient) -> None:
    """What Juju and the cluster provide: the app's Service, and its endpoints on this machine
    (the API server resolves through Endpoints up to 1.32 and EndpointSlices since 1.33)."""
    port = WEBHOOK_PORT
    await kube.create(
        Service(
            metadata=ObjectMeta(name=APP, namespace=MODEL),
            spec=ServiceSpec(ports=[ServicePort(name="webhook", port=port, targetPort=port)]),
        )
    )
    address = host_address()
    await kube.create(
        Endpoints(
            metadata=ObjectMeta(name=APP, namespace=MODEL),
            subsets=[
                core_v1.EndpointSubset(
                    addresses=[core_v1.EndpointAddress(ip=address)],
                    ports=[core_v1.EndpointPort(name="webhook", port=port)],
                )
            ],
        )
    )
    await kube.create(
        EndpointSlice(
            metadata=ObjectMeta(
                name=f"{APP}-unit",
                namespace=MODEL,
                labels={"kubernetes.io/service-name": APP},
            ),
            addressType="IPv4",
            endpoints=[discovery_v1.Endpoint(addresses=[address])],
            ports=[discovery_v1.EndpointPort(name="webhook", port=port, protocol="TCP")],
        )
    )
