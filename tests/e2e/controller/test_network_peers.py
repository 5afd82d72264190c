"""Who a tenant's maas-api admits, as the API server stores it (docs/differences.md D37;
docs/platform.md §9): from the gateway namespace only the tenant's Gateway's pods, from the
controller's namespace only the controller's pods (when told their labels), never a maas-api
or cleanup pod, plus the tenant's own cleanup pods and Authorino.

What is checked here is the stored NetworkPolicy; test_network_enforced.py checks what the
node's policy engine makes of it, in packets.
"""

from __future__ import annotations

from typing import Any

import pytest
from devtools.cluster import LocalCluster
from devtools.maas_api import FakeMaasApi
from lightkube import AsyncClient

from aitenant import contract
from aitenant.platform import kinds

from ..harness import GATEWAY_NS, INFRA_NS, RunningController, WebhookTLS, e2e_settings, eventually
from ..tenants import Names, make_tenant, wait_phase
from .tenant_platform import get

pytestmark = pytest.mark.e2e

NOT_MAAS_API = {
    "key": "app.kubernetes.io/name",
    "operator": "NotIn",
    "values": ["maas-api", "maas-api-cleanup"],
}


def expected_peers(
    tenant: str, gateway_pods: dict[str, str] | None, controller_pods: dict[str, str] | None
) -> list[dict[str, Any]]:
    gateway: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": GATEWAY_NS}}
    }
    if gateway_pods:
        gateway["podSelector"] = {"matchLabels": gateway_pods}
    controller_selector: dict[str, Any] = {"matchExpressions": [NOT_MAAS_API]}
    if controller_pods:
        controller_selector["matchLabels"] = controller_pods
    return [
        gateway,
        {
            # The e2e controller's namespace is the infra namespace.
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": INFRA_NS}},
            "podSelector": controller_selector,
        },
        {
            "podSelector": {
                "matchLabels": {contract.LABEL_TENANT_INSTANCE: f"maas-key-cleanup-{tenant}"}
            }
        },
        {
            "namespaceSelector": {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "In",
                        "values": list(contract.DEFAULT_AUTHORINO_NAMESPACES),
                    }
                ]
            },
            "podSelector": {"matchLabels": {"authorino-resource": "authorino"}},
        },
    ]


async def stored_peers(kube: AsyncClient, tenant: str) -> list[dict[str, Any]]:
    policy = await get(kube, kinds.NETWORK_POLICY, f"maas-api-{tenant}", INFRA_NS)
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": 8443, "protocol": "TCP"}]
    return rule["from"]


async def peers_become(kube: AsyncClient, tenant: str, expected: list[dict[str, Any]]) -> None:
    async def check() -> bool:
        return await stored_peers(kube, tenant) == expected

    try:
        await eventually(check, timeout=30)
    except AssertionError:
        assert await stored_peers(kube, tenant) == expected  # shows the difference
        raise


async def test_maas_api_admits_only_the_gateways_and_the_controllers_pods(
    cluster: LocalCluster,
    kube: AsyncClient,
    controller: RunningController,
    maas_api: FakeMaasApi,
    webhook_tls: WebhookTLS,
    unique: Names,
) -> None:
    name = unique("peers")
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    # Defaults: the Gateway's pods by gateway.networking.k8s.io/gateway-name; with no
    # --controller-pod-selector, every pod of the controller's namespace but maas-api's.
    default = expected_peers(
        name, {"gateway.networking.k8s.io/gateway-name": name}, controller_pods=None
    )
    assert await stored_peers(kube, name) == default

    # A controller told its pods' labels and another implementation's Gateway labels: the
    # stored policy of the existing tenant takes exactly those peers.
    await controller.stop()
    narrowed = RunningController(
        cluster,
        e2e_settings(
            maas_api,
            webhook_tls,
            controller_pod_selector="app.kubernetes.io/name=aitenant-k8s",
            gateway_pod_selector="example.org/owning-gateway={gateway},example.org/role=proxy",
        ),
    )
    await narrowed.start()
    try:
        await peers_become(
            kube,
            name,
            expected_peers(
                name,
                {"example.org/owning-gateway": name, "example.org/role": "proxy"},
                {"app.kubernetes.io/name": "aitenant-k8s"},
            ),
        )
    finally:
        await narrowed.stop()
        await controller.start()
    # The session controller, on its defaults again, puts the default peers back.
    await peers_become(kube, name, default)
