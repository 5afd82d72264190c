"""Sample objects and small cluster chores shared by the e2e tests, the demo and benchmarks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, cast

from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import async_load_in_cluster_generic_resources
from lightkube.models.core_v1 import ServicePort, ServiceSpec
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace, Secret, Service
from lightkube.resources.rbac_authorization_v1 import ClusterRole
from lightkube.types import PatchType

from aitenant import contract, manifests
from aitenant.platform.discovery import http_fetch
from aitenant.resources import AITenant, Gateway
from devtools import crds, postgres
from devtools.node import NODE_IP


async def server_version(client: AsyncClient) -> dict[str, Any]:
    """The API server's /version answer."""
    info = await http_fetch(client)("/version")
    if info is None:
        raise RuntimeError("the API server has no /version")
    return info


async def install_crds(
    client: AsyncClient, documents: Iterable[dict[str, Any]] | None = None, timeout: float = 60
) -> None:
    """Server-side apply CRDs (default: every one the suite needs, ``crds.all_documents``) and
    wait until each is Established."""
    names = []
    for doc in crds.all_documents() if documents is None else documents:
        crd = cast(CustomResourceDefinition, CustomResourceDefinition.from_dict(doc))
        await client.apply(crd, field_manager="aitenant-tests", force=True)
        names.append(doc["metadata"]["name"])
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for name in names:
        while True:
            crd = await client.get(CustomResourceDefinition, name)
            conds = (crd.status.conditions if crd.status else None) or []
            if any(c.type == "Established" and c.status == "True" for c in conds):
                break
            if loop.time() > deadline:
                raise TimeoutError(f"CRD {name} not established")
            await asyncio.sleep(0.1)
    await async_load_in_cluster_generic_resources(client)


CEL_RULES_PATH = "/spec/versions/0/schema/openAPIV3Schema/x-kubernetes-validations"


@contextlib.asynccontextmanager
async def older_crd(client: AsyncClient, resource: Any, removed: list[str]) -> AsyncIterator[None]:
    """One of our CRDs without the schema parts at the JSON pointers ``removed``, as an older
    installation had it (objects today's schema forbids may exist there); the shipped CRD
    again afterwards. The API server applies each change a moment later."""
    info = resource._api_info
    crd_name = f"{info.plural}.{info.resource.group}"
    await client.patch(
        CustomResourceDefinition,
        crd_name,
        [{"op": "remove", "path": path} for path in removed],
        patch_type=PatchType.JSON,
    )
    try:
        yield
    finally:
        shipped = manifests.crd_documents()
        await install_crds(client, [d for d in shipped if d["metadata"]["name"] == crd_name])


@contextlib.asynccontextmanager
async def without_name_rule(client: AsyncClient, resource: Any) -> AsyncIterator[None]:
    """``older_crd`` without the CRD's CEL rules (the name rule), once the API server has
    applied the change."""
    info = resource._api_info
    async with older_crd(client, resource, [CEL_RULES_PATH]):
        probe = {
            "apiVersion": f"{info.resource.group}/{info.resource.version}",
            "kind": info.resource.kind,
            "metadata": {"name": "name-rule-probe", "namespace": "default"},
            "spec": {},
        }
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            try:
                await client.create(resource.from_dict(probe), dry_run=True)
                break
            except ApiError:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.1)
        yield


async def ensure_namespace(
    client: AsyncClient, name: str, labels: dict[str, str] | None = None
) -> None:
    with contextlib.suppress(ApiError):
        await client.create(Namespace(metadata=ObjectMeta(name=name, labels=labels)))


def gateway(name: str, namespace: str, selector: dict[str, str] | None = None) -> dict[str, Any]:
    listener: dict[str, Any] = {"name": "https", "port": 443, "protocol": "HTTPS"}
    if selector is not None:
        listener["allowedRoutes"] = {
            "namespaces": {"from": "Selector", "selector": {"matchLabels": selector}}
        }
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"gatewayClassName": "example", "listeners": [listener]},
    }


def aitenant(
    name: str,
    namespace: str = contract.DEFAULT_AITENANT_NAMESPACE,
    *,
    gateway_name: str | None = None,
    oidc: dict[str, Any] | None = None,
    rbac_admins: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if gateway_name is not None:
        spec["gateway"] = {"name": gateway_name}
    if oidc is not None:
        spec["oidc"] = oidc
    if rbac_admins is not None:
        spec["rbac"] = {"admins": rbac_admins}
    return {
        "apiVersion": contract.API_VERSION,
        "kind": "AITenant",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def maas_subscription(
    name: str, namespace: str, finalizers: list[str] | None = None
) -> dict[str, Any]:
    """A MaaSSubscription (another MaaS controller's kind; we only ever delete them)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if finalizers:
        metadata["finalizers"] = finalizers
    return {
        "apiVersion": contract.API_VERSION,
        "kind": "MaaSSubscription",
        "metadata": metadata,
        "spec": {
            "owner": {"groups": [{"name": "team"}]},
            "modelRefs": [
                {
                    "name": "granite",
                    "namespace": namespace,
                    "tokenRateLimits": [{"limit": 1000, "window": "1m"}],
                }
            ],
        },
    }


def maas_auth_policy(name: str, namespace: str) -> dict[str, Any]:
    """A MaaSAuthPolicy (another MaaS controller's kind; we only ever delete them)."""
    return {
        "apiVersion": contract.API_VERSION,
        "kind": "MaaSAuthPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "modelRefs": [{"name": "granite", "namespace": namespace}],
            "subjects": {"groups": [{"name": "team"}]},
        },
    }


async def create_gateway(client: AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """The Gateway, and the Service a Gateway implementation makes for it (maas-api looks it
    up at start: docs/maas-api.md)."""
    gateway = dict(await client.create(Gateway.from_dict(body)))
    meta = gateway["metadata"]
    service = Service(
        metadata=ObjectMeta(
            name=f"{meta['name']}-gateway",
            namespace=meta["namespace"],
            labels={"gateway.networking.k8s.io/gateway-name": meta["name"]},
            ownerReferences=[
                OwnerReference(
                    apiVersion=gateway["apiVersion"],
                    kind="Gateway",
                    name=meta["name"],
                    uid=meta["uid"],
                    controller=True,
                )
            ],
        ),
        spec=ServiceSpec(ports=[ServicePort(name="https", port=443, targetPort=443)]),
    )
    with contextlib.suppress(ApiError):  # made already (a name of 63 characters is refused)
        await client.create(service)
    return gateway


async def create_aitenant(client: AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    return dict(await client.create(AITenant.from_dict(body)))


async def apply_shipped_cluster_roles(client: AsyncClient, field_manager: str) -> None:
    """The ClusterRoles the charm applies: the controller's and the ``maas-api`` one the
    controller binds to each tenant's maas-api (which reads its database Secret with it)."""
    for doc in manifests.cluster_role_documents():
        role = cast(ClusterRole, ClusterRole.from_dict(doc))
        await client.apply(role, field_manager=field_manager, force=True)


# -- Tenant platform: what a platform administrator would provide -----------------------------
DB_SECRET = "maas-db-config"


def write_ca(directory: Path) -> tuple[Path, Path]:
    """A CA for maas-api serving certificates (docs/differences.md D9), as the charm hands it
    over."""
    import trustme  # tests, demo and benchmarks only

    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    cert_file, key_file = directory / "maas-api-ca.crt", directory / "maas-api-ca.key"
    ca.cert_pem.write_to_path(str(cert_file))
    ca.private_key_pem.write_to_path(str(key_file))
    return cert_file, key_file


async def ensure_db_secret(client: AsyncClient, namespace: str, name: str = DB_SECRET) -> None:
    """The Secret maas-api reads its database URL from (``--maas-api-db-secret``)."""
    body = Secret(
        metadata=ObjectMeta(name=name, namespace=namespace),
        # The node's database (served only where the real maas-api runs: docs/maas-api.md).
        stringData={"DB_CONNECTION_URL": postgres.database_url(NODE_IP)},
    )
    with contextlib.suppress(ApiError):
        await client.create(body)


def is_available(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return int(status.get("observedGeneration") or 0) >= int(
        obj["metadata"].get("generation") or 0
    ) and any(
        c.get("type") == "Available" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


async def wait_namespace(client: AsyncClient, name: str, timeout: float) -> None:
    """Wait until a namespace exists (the controller creates its namespace at start)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await client.get(Namespace, name)
            return
        except ApiError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


# Who a sample AdmissionReview says asked: the local control plane's admin (devtools/cluster.py),
# whom the webhook's SubjectAccessReview allows to use any Gateway.
ADMIN_USER_INFO = {"username": "admin", "groups": ["system:masters", "system:authenticated"]}


def admission_review_body(
    name: str, gateway_name: str, namespace: str = contract.DEFAULT_AITENANT_NAMESPACE
) -> bytes:
    """An AdmissionReview for the CREATE of an AITenant by the cluster's admin, as the API server
    would send it (without a user the webhook cannot check who may use the Gateway, and denies)."""
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "operation": "CREATE",
                "kind": {"group": contract.GROUP, "version": contract.VERSION, "kind": "AITenant"},
                "resource": {
                    "group": contract.GROUP,
                    "version": contract.VERSION,
                    "resource": "aitenants",
                },
                "namespace": namespace,
                "userInfo": ADMIN_USER_INFO,
                "object": aitenant(name, namespace, gateway_name=gateway_name),
            },
        }
    ).encode()
