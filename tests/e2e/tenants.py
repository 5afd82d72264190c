"""Helpers for e2e tests about AITenants: create one, read it, wait for its phase, cordon the
node meanwhile, and wait until the controller has seen an event (tests/e2e/conftest.py runs
the controller)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from devtools import samples
from devtools.node import NODE_NAME
from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Node as K8sNode
from lightkube.types import PatchType

from aitenant.resources import AITenant
from aitenant.runtime.control.controller import Key

from .harness import AITENANT_NS, GATEWAY_NS, RunningController, eventually

Names = Callable[[str], str]


async def get_tenant(kube: AsyncClient, name: str, namespace: str = AITENANT_NS) -> dict[str, Any]:
    return dict(await kube.get(AITenant, name, namespace=namespace))


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == "Ready":
            return cond
    return {}


# A tenant turns Active once its maas-api pod is Ready: the pod's start and its readiness
# probe's initial delay (docs/platform.md §1), slower on a busy node.
PHASE_TIMEOUT = 60.0


async def wait_phase(
    kube: AsyncClient,
    name: str,
    phase: str,
    reason: str | None = None,
    timeout: float = PHASE_TIMEOUT,
    namespace: str = AITENANT_NS,
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await get_tenant(kube, name, namespace)
        status = obj.get("status") or {}
        if status.get("phase") == phase and (reason is None or ready(obj).get("reason") == reason):
            return obj
        return None

    return await eventually(check, timeout=timeout)


async def make_tenant(
    kube: AsyncClient,
    name: str,
    *,
    gateway_name: str | None = None,
    namespace: str = AITENANT_NS,
    **kwargs: Any,
) -> None:
    gw = gateway_name or name
    try:
        await samples.create_gateway(kube, samples.gateway(gw, GATEWAY_NS))
    except ApiError as exc:
        if exc.status.code != 409:
            raise
    await samples.create_aitenant(
        kube, samples.aitenant(name, namespace, gateway_name=gateway_name, **kwargs)
    )


@contextlib.asynccontextmanager
async def node_cordoned(kube: AsyncClient) -> AsyncIterator[None]:
    """``kubectl cordon`` of the node meanwhile: a new pod waits unscheduled (pods already
    placed run on)."""
    cordon = {"spec": {"unschedulable": True}}
    await kube.patch(K8sNode, NODE_NAME, cordon, patch_type=PatchType.MERGE)
    try:
        yield
    finally:
        uncordon = {"spec": {"unschedulable": None}}
        await kube.patch(K8sNode, NODE_NAME, uncordon, patch_type=PatchType.MERGE)


async def sentinel_reconcile(
    kube: AsyncClient, controller: RunningController, unique: Callable[[str], str]
) -> None:
    """Create an AITenant in the wrong namespace and wait for its first reconcile.

    The AITenant informer delivers events in order and the queue hands keys out in order, so
    once the sentinel's reconcile has started, every key enqueued by an earlier AITenant event
    has started its reconcile too: a test can then check that an event did *not* bring a key
    back without waiting a fixed time. (A misplaced AITenant fails at once, without requeue.)
    """
    name = unique("sentinel")
    await samples.create_aitenant(kube, samples.aitenant(name, "default"))
    key = Key("default", name)

    async def seen() -> bool:
        return key in controller.reconciled

    await eventually(seen)
    await kube.delete(AITenant, name, namespace="default")


async def informer_caught_up(controller: RunningController, obj: dict[str, Any]) -> None:
    """Wait until the controller's AITenant informer holds ``obj`` at its resourceVersion."""
    assert controller.app is not None
    tenants = controller.app.tenants
    meta = obj["metadata"]

    async def current() -> bool:
        cached = tenants.get(meta["namespace"], meta["name"]) or {"metadata": {}}
        return cached["metadata"].get("resourceVersion") == meta["resourceVersion"]

    await eventually(current)
