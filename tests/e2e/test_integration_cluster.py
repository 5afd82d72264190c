"""The integration run's cluster chores (tests/integration/cluster.py) against a real API server,
so what the Juju run leans on (the platform's CRDs, the administrator's objects, the cleanup
with a finalizer nobody removes) is known to work before a controller is at hand."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from devtools import samples
from devtools.cluster import LocalCluster
from lightkube import AsyncClient, Client, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.core_v1 import Namespace, Secret, Service
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding

from aitenant import contract, manifests
from aitenant.resources import AITenant, Gateway, MaasTenantConfig
from tests.integration import cluster as it

NAMES = ("it-e2e-gw", "it-e2e-at", "it-e2e-infra")
TENANT = "it-e2e"
TENANT_NS = f"{contract.TENANT_NAMESPACE_PREFIX}{TENANT}"


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[Client]:
    sync = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager=it.FIELD_MANAGER)
    yield sync
    sync.close()


def binding(name: str, namespace: str) -> ClusterRoleBinding:
    return ClusterRoleBinding(
        metadata=ObjectMeta(name=name),
        roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name="view"),
        subjects=[Subject(kind="ServiceAccount", name="maas-api", namespace=namespace)],
    )


async def test_platform_prepared_and_a_held_tenant_removed(
    cluster: LocalCluster, client: Client
) -> None:
    # GIVEN a cluster serving our CRDs (the charm's part); the Gateway API only if another
    # test of the session installed it
    admin = AsyncClient(KubeConfig.from_file(cluster.kubeconfig), field_manager="aitenant-tests")
    try:
        await samples.install_crds(admin, manifests.crd_documents())
    finally:
        await admin.close()
    bare = not it.crd_exists(client, it.GATEWAY_CRD)
    # WHEN the run prepares the platform administrator's part
    created = it.ensure_platform_crds(client)
    gateway_ns, aitenant_ns, infra_ns = NAMES
    for namespace in NAMES:
        it.ensure_namespace(client, namespace)
    it.ensure_gateway(client, "gw", gateway_ns)
    it.ensure_db_secret(client, infra_ns, "postgresql://maas@db:5432/maas")
    # THEN the Gateway API is served, and each object is there (and a second call is harmless)
    assert (it.GATEWAY_CRD in created) is bare
    assert it.crd_exists(client, it.GATEWAY_CRD)
    assert it.ensure_platform_crds(client) == []
    it.ensure_gateway(client, "gw", gateway_ns)
    assert it.exists(client, Gateway, "gw", gateway_ns)
    assert it.exists(client, Service, "gw-gateway", gateway_ns)
    secret = client.get(Secret, contract.MAAS_API_DB_SECRET, namespace=infra_ns)
    assert secret.data is not None
    assert "DB_CONNECTION_URL" in secret.data
    # GIVEN a tenant and its config held by finalizers no controller will remove
    tenant = it.aitenant(TENANT, aitenant_ns, "gw")
    tenant["metadata"]["finalizers"] = [contract.AITENANT_FINALIZER]
    client.create(tenant)
    it.ensure_namespace(client, TENANT_NS)
    config = MaasTenantConfig.from_dict(
        {
            "apiVersion": contract.API_VERSION,
            "kind": "MaasTenantConfig",
            "metadata": {
                "name": "default-tenant",
                "namespace": TENANT_NS,
                "finalizers": [contract.TENANT_CONFIG_FINALIZER],
            },
            "spec": {},
        }
    )
    client.create(config)
    assert it.count_aitenants(client) >= 1
    assert it.admission_refusal(client, it.aitenant("other", aitenant_ns, "gw")) == ""
    assert not it.exists(client, AITenant, "other", aitenant_ns)  # a dry run stores nothing
    # AND the tenant's maas-api binding, and another one that is not the run's
    client.create(binding("maas-api-it-e2e", infra_ns))
    client.create(binding("not-the-runs", "elsewhere"))
    # WHEN the run cleans up
    it.remove_tenant(client, TENANT, aitenant_ns)
    removed = it.remove_bindings_into(client, [infra_ns])
    it.remove_namespaces(client, [TENANT_NS, *NAMES])
    # THEN the held objects are gone, and only the run's binding with them
    for res, name, namespace in (
        (AITenant, TENANT, aitenant_ns),
        (MaasTenantConfig, "default-tenant", TENANT_NS),
    ):
        it.eventually(
            lambda r=res, n=name, ns=namespace: not it.exists(client, r, n, ns) or None,
            timeout=30,
            what=f"{name} deleted",
            every=0.2,
        )
    assert removed == ["maas-api-it-e2e"]
    assert it.exists(client, ClusterRoleBinding, "not-the-runs")
    client.delete(ClusterRoleBinding, "not-the-runs")
    for namespace in (TENANT_NS, *NAMES):
        assert not it.exists(client, Namespace, namespace) or terminating(client, namespace)


def terminating(client: Client, namespace: str) -> bool:
    status = client.get(Namespace, namespace).status
    return status is not None and status.phase == "Terminating"
