"""What the integration run reads and writes on the cluster itself (lightkube, ``$KUBECONFIG``):
the platform administrator's part of a tenant (namespaces, a Gateway, the database Secret),
AITenants, and the cleanup of what the run made.

A tenant goes Active only where the cluster serves the Gateway API and Kuadrant's kinds (the
platform writes them: docs/contract.md §3.6). A cluster that serves no Gateway is taken for a
bare test cluster (ours, devtools/): the missing CRDs of devtools/crds.py are created there,
never replacing one the cluster has.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from devtools import crds
from lightkube import ApiError, Client
from lightkube.models.core_v1 import ServicePort, ServiceSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace, Secret, Service
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding
from lightkube.types import PatchType

from aitenant import contract
from aitenant.resources import AITenant, Gateway, MaasTenantConfig

FIELD_MANAGER = "aitenant-integration"
GATEWAY_CRD = "gateways.gateway.networking.k8s.io"
T = TypeVar("T")


def eventually(read: Callable[[], T | None], *, timeout: float, what: str, every: float = 2) -> T:
    """The first non-None ``read()`` within ``timeout`` seconds; TimeoutError naming ``what``
    and the last error otherwise (an ApiError counts as "not yet")."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = read()
        except ApiError as exc:
            value, last = None, exc
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not seen within {timeout:.0f} s (last error: {last})")
        time.sleep(every)


def crd_exists(client: Client, name: str) -> bool:
    try:
        client.get(CustomResourceDefinition, name)
    except ApiError as exc:
        if exc.status.code == 404:
            return False
        raise
    return True


def ensure_platform_crds(client: Client) -> list[str]:
    """On a cluster without the Gateway API, create the CRDs devtools installs besides ours
    (Gateway API, Kuadrant, the MaaS stand-ins) that it lacks; the names created."""
    if crd_exists(client, GATEWAY_CRD):
        return []
    created: list[str] = []
    for doc in crds.third_party_and_stand_ins():
        name = doc["metadata"]["name"]
        if crd_exists(client, name):
            continue
        client.create(cast(CustomResourceDefinition, CustomResourceDefinition.from_dict(doc)))
        created.append(name)
    for name in created:
        eventually(lambda n=name: _established(client, n), timeout=60, what=f"CRD {name}")
    return created


def _established(client: Client, name: str) -> bool | None:
    crd = client.get(CustomResourceDefinition, name)
    conditions = (crd.status.conditions if crd.status else None) or []
    return True if any(c.type == "Established" and c.status == "True" for c in conditions) else None


def ensure_namespace(client: Client, name: str) -> None:
    with contextlib.suppress(ApiError):  # there already
        client.create(Namespace(metadata=ObjectMeta(name=name)))


def ensure_gateway(client: Client, name: str, namespace: str) -> None:
    """A Gateway and the Service a Gateway implementation makes for it (maas-api looks it up
    at start: docs/maas-api.md). Only read by the controller, never programmed here."""
    body = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "gatewayClassName": "example",
            "listeners": [{"name": "https", "port": 443, "protocol": "HTTPS"}],
        },
    }
    with contextlib.suppress(ApiError):
        client.create(Gateway.from_dict(body))
    service = Service(
        metadata=ObjectMeta(
            name=f"{name}-gateway",
            namespace=namespace,
            labels={"gateway.networking.k8s.io/gateway-name": name},
        ),
        spec=ServiceSpec(ports=[ServicePort(name="https", port=443, targetPort=443)]),
    )
    with contextlib.suppress(ApiError):
        client.create(service)


def ensure_db_secret(client: Client, namespace: str, url: str) -> None:
    """The Secret maas-api reads its database URL from (docs/platform.md §1)."""
    secret = Secret(
        metadata=ObjectMeta(name=contract.MAAS_API_DB_SECRET, namespace=namespace),
        stringData={"DB_CONNECTION_URL": url},
    )
    with contextlib.suppress(ApiError):
        client.create(secret)


def aitenant(name: str, namespace: str, gateway: str) -> Any:
    return AITenant.from_dict(
        {
            "apiVersion": contract.API_VERSION,
            "kind": "AITenant",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"gateway": {"name": gateway}},
        }
    )


def tenant_status(client: Client, name: str, namespace: str) -> dict[str, Any]:
    obj = client.get(AITenant, name, namespace=namespace)
    return dict(obj.get("status") or {})


def phase(client: Client, name: str, namespace: str) -> str:
    return str(tenant_status(client, name, namespace).get("phase") or "")


def count_aitenants(client: Client) -> int:
    return sum(1 for _ in client.list(AITenant, namespace="*"))


def admission_refusal(client: Client, body: Any) -> str:
    """Create ``body`` as a dry run (the webhook is called, nothing is stored); the API
    server's message when refused, "" when admitted."""
    try:
        client.create(body, dry_run=True)
    except ApiError as exc:
        return exc.status.message or str(exc)
    return ""


def exists(client: Client, res: Any, name: str, namespace: str | None = None) -> bool:
    try:
        client.get(res, name, namespace=namespace)
    except ApiError as exc:
        if exc.status.code == 404:
            return False
        raise
    return True


def remove_tenant(client: Client, name: str, namespace: str) -> None:
    """Delete one AITenant of the run and its tenant's MaasTenantConfig whether or not a
    controller runs: deleted first (no finalizer can be added to an object being deleted),
    then their finalizers dropped (merge patch), or the deletion would wait for a cleanup."""
    tenant_namespace = f"{contract.TENANT_NAMESPACE_PREFIX}{name}"
    for res, obj_name, obj_namespace in (
        (AITenant, name, namespace),
        (MaasTenantConfig, "default-tenant", tenant_namespace),
    ):
        with contextlib.suppress(ApiError):
            client.delete(res, obj_name, namespace=obj_namespace)
        with contextlib.suppress(ApiError):
            client.patch(
                res,
                obj_name,
                {"metadata": {"finalizers": None}},
                namespace=obj_namespace,
                patch_type=PatchType.MERGE,
            )


def remove_namespaces(client: Client, names: Iterable[str]) -> None:
    for name in names:
        with contextlib.suppress(ApiError):
            client.delete(Namespace, name)


def remove_bindings_into(client: Client, namespaces: Iterable[str]) -> list[str]:
    """Delete the ClusterRoleBindings of service accounts in ``namespaces`` (a tenant's
    ``maas-api[-<t>]`` binding outlives the charm); their names."""
    wanted = set(namespaces)
    removed: list[str] = []
    for binding in client.list(ClusterRoleBinding):
        subjects = binding.subjects or []
        name = binding.metadata.name if binding.metadata else None
        if name and any(s.kind == "ServiceAccount" and s.namespace in wanted for s in subjects):
            with contextlib.suppress(ApiError):
                client.delete(ClusterRoleBinding, name)
                removed.append(name)
    return removed
