"""maas-api reads the database Secret through its tenant's Role in the infra namespace
(docs/platform.md §2, docs/differences.md D39), judged by the real API server's authorizer with
tokens the API server issues to the tenants' maas-api ServiceAccounts (TokenRequest): each reads
``maas-db-config`` in the infra namespace, none reads a Secret of that name anywhere else, and
deleting a tenant takes its Role and RoleBinding and nobody else's.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from devtools import samples
from devtools.cluster import ADMIN_TOKEN, LocalCluster
from lightkube import ApiError, AsyncClient

from aitenant import contract
from aitenant.platform import kinds
from aitenant.resources import AITenant

from ..harness import AITENANT_NS, INFRA_NS, RunningController, eventually
from ..tenants import PHASE_TIMEOUT, Names, make_tenant, wait_phase

pytestmark = pytest.mark.e2e

DB_SECRET = contract.MAAS_API_DB_SECRET
TOKEN_SECONDS = 600


def http(cluster: LocalCluster, token: str) -> httpx.AsyncClient:
    # verify=False: the local API server's certificate is self-signed (as in its kubeconfig).
    return httpx.AsyncClient(
        base_url=cluster.server, verify=False, headers={"Authorization": f"Bearer {token}"}
    )


async def service_account_token(cluster: LocalCluster, name: str) -> str:
    """A token of ServiceAccount ``name`` in the infra namespace: what its pods are given."""
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS},
    }
    url = f"/api/v1/namespaces/{INFRA_NS}/serviceaccounts/{name}/token"
    async with http(cluster, ADMIN_TOKEN) as admin:
        response = await admin.post(url, json=body)
    assert response.status_code == 201, response.text
    token: str = response.json()["status"]["token"]
    return token


async def secret_status(cluster: LocalCluster, token: str, namespace: str, name: str) -> int:
    """The status the API server answers that token's GET of a Secret."""
    async with http(cluster, token) as client:
        response = await client.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    return response.status_code


async def exists(kube: AsyncClient, kind: kinds.Kind, name: str) -> bool:
    try:
        await kube.get(kind.resource, name, namespace=INFRA_NS)
    except ApiError as exc:
        if exc.status.code == 404:
            return False
        raise
    return True


async def active_tenant(kube: AsyncClient, name: str) -> None:
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")


async def test_each_tenants_maas_api_reads_the_db_secret_in_the_infra_namespace_only(
    cluster: LocalCluster, kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    first, second = unique("db-a"), unique("db-b")
    # A Secret of the same name where no maas-api runs: readable with a ClusterRole rule.
    elsewhere = unique("db-elsewhere")
    await samples.ensure_namespace(kube, elsewhere)
    await samples.ensure_db_secret(kube, elsewhere)
    for name in (first, second):
        await active_tenant(kube, name)

    tokens: dict[str, str] = {}
    for name in (first, second):
        role = f"maas-api-{name}-db-secret"
        assert await exists(kube, kinds.ROLE, role)
        assert await exists(kube, kinds.ROLE_BINDING, role)
        tokens[name] = await service_account_token(cluster, f"maas-api-{name}")
        assert await secret_status(cluster, tokens[name], INFRA_NS, DB_SECRET) == 200
        assert await secret_status(cluster, tokens[name], elsewhere, DB_SECRET) == 403
        # Only that Secret: not even its own serving certificate next to it.
        serving = f"maas-api-{name}-serving-cert"
        assert await secret_status(cluster, tokens[name], INFRA_NS, serving) == 403

    await kube.delete(AITenant, first, namespace=AITENANT_NS)

    async def first_cleaned() -> bool:
        role = f"maas-api-{first}-db-secret"
        return not (
            await exists(kube, kinds.ROLE, role) or await exists(kube, kinds.ROLE_BINDING, role)
        )

    await eventually(first_cleaned, timeout=PHASE_TIMEOUT)
    role = f"maas-api-{second}-db-secret"
    assert await exists(kube, kinds.ROLE, role)
    assert await exists(kube, kinds.ROLE_BINDING, role)
    assert await secret_status(cluster, tokens[second], INFRA_NS, DB_SECRET) == 200
    # The first tenant's ServiceAccount went with it: its token no longer authenticates (once
    # the API server's ServiceAccount cache has seen the deletion).

    async def first_token_refused() -> bool:
        return await secret_status(cluster, tokens[first], INFRA_NS, DB_SECRET) == 401

    await eventually(first_token_refused)


async def test_the_tenants_binding_is_put_back_when_deleted(
    cluster: LocalCluster, kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Tracked like every platform object: its informer notices the deletion and the config's
    next pass writes it again."""
    name = unique("db-back")
    await active_tenant(kube, name)
    binding = f"maas-api-{name}-db-secret"
    await kube.delete(kinds.ROLE_BINDING.resource, binding, namespace=INFRA_NS)

    async def restored() -> Any:
        return await exists(kube, kinds.ROLE_BINDING, binding)

    await eventually(restored, timeout=PHASE_TIMEOUT)
    token = await service_account_token(cluster, f"maas-api-{name}")

    async def readable() -> bool:
        return await secret_status(cluster, token, INFRA_NS, DB_SECRET) == 200

    await eventually(readable)
