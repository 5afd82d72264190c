"""Sample objects and small cluster chores shared by the e2e tests, the demo and benchmarks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import yaml
from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import async_load_in_cluster_generic_resources
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from aitenant import contract
from aitenant.resources import AITenant, Gateway, MaasTenantConfig

log = logging.getLogger(__name__)

MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"
REPO_ROOT = Path(__file__).resolve().parents[3]
TEST_CRDS = REPO_ROOT / "tests" / "crds"


def crd_documents(*folders: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for folder in folders:
        for path in sorted(folder.glob("*.yaml")):
            docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


async def install_crds(client: AsyncClient, folders: Iterable[Path], timeout: float = 30) -> None:
    """Server-side apply every CRD in ``folders`` and wait until each is Established."""
    names = []
    for doc in crd_documents(*folders):
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


async def create_gateway(client: AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    return dict(await client.create(Gateway.from_dict(body)))


async def create_aitenant(client: AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    return dict(await client.create(AITenant.from_dict(body)))


async def mark_config_ready(
    client: AsyncClient, namespace: str, name: str = "default-tenant"
) -> None:
    """Report a MaasTenantConfig Ready at its generation, as the platform reconciler would."""
    config = await client.get(MaasTenantConfig, name, namespace=namespace)
    generation = config["metadata"].get("generation", 1)
    patch = {
        "status": {
            "phase": "Active",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Reconciled",
                    "message": "simulated platform readiness",
                    "observedGeneration": generation,
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    }
    await client.patch(
        MaasTenantConfig.Status, name, patch, namespace=namespace, patch_type=PatchType.MERGE
    )


async def simulate_platform_readiness(client: AsyncClient) -> None:
    """Until cancelled: mark every AITenant-managed MaasTenantConfig Ready when it is not.

    Stands in for the platform reconciler (a separate issue) in the demo and benchmarks.
    """
    while True:
        try:
            async for _, obj in client.watch(
                MaasTenantConfig, namespace="*", labels={contract.LABEL_MANAGED_BY_AITENANT: "true"}
            ):
                meta = obj["metadata"]
                if meta.get("deletionTimestamp"):
                    continue
                conds = (obj.get("status") or {}).get("conditions") or []
                ready = any(
                    c.get("type") == "Ready"
                    and c.get("status") == "True"
                    and c.get("observedGeneration") == meta.get("generation")
                    for c in conds
                )
                if not ready:
                    with contextlib.suppress(ApiError):
                        await mark_config_ready(client, meta["namespace"], meta["name"])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("readiness simulator: %r", exc)
            await asyncio.sleep(0.5)
