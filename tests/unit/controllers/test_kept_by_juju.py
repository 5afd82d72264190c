"""What the controller creates carries the label Juju's model webhook skips.

Under Juju the controller runs as the application's ServiceAccount; without that label Juju's
webhook marks what it creates and `juju remove-application` deletes it (tenant namespaces,
tenants' Roles, the default AITenant, Config/default: README.md, "Removing the charm").
Every create path is driven here against a scripted API that has nothing yet (reads answer
404) and accepts every create, and each body it sends is checked.
"""

from __future__ import annotations

from typing import Any

import httpx2

from aitenant import contract
from aitenant.app.aitenant_namespace import ensure_managed_namespace
from aitenant.controllers.aitenant.context import TenantContext
from aitenant.controllers.aitenant.gateway_claim import GatewayClaims
from aitenant.controllers.aitenant.rbac import TenantRoles
from aitenant.controllers.default_tenant.bootstrap import DefaultTenantBootstrap
from aitenant.resources import AITenantView
from aitenant.runtime.cache.reads import CachedReads

from ..scripted_api import ScriptedApi, echo, listing, verb_of
from .aitenant.test_reconciler import GATEWAY_NS, NS, SETTINGS, Harness, tenant

TENANT_NS = "ai-tenant-red"


class AcceptsEveryCreate(ScriptedApi):
    """Nothing exists (every read is 404); every create is accepted and echoed."""

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if verb_of(request) == "CREATE" and not self.scripted("CREATE", request.url.path):
            self.on("CREATE", request.url.path, echo())
        return super().__call__(request)

    def created(self) -> list[dict[str, Any]]:
        return [s.body for s in self.sent if s.verb == "CREATE" and s.body]


def context() -> TenantContext:
    return TenantContext(
        tenant=AITenantView(tenant("red")),
        tenant_namespace=TENANT_NS,
        gateway_namespace=GATEWAY_NS,
        gateway_name="red",
    )


def kept(body: dict[str, Any]) -> bool:
    labels = (body.get("metadata") or {}).get("labels") or {}
    return labels.items() >= contract.KEPT_BY_JUJU_LABELS.items()


async def test_every_object_the_aitenant_reconciler_creates_is_kept_by_juju() -> None:
    h = Harness(tenant("red"))
    api = AcceptsEveryCreate()
    h.api = api
    client = api.client()
    reads = CachedReads(client)
    ctx = context()
    reconciler = h.reconciler
    reconciler.client = client
    reconciler.reads = reads
    await reconciler.ensure_tenant_namespace(ctx)
    await reconciler._create_tenant_config(ctx, "MaasTenantConfig")  # pyright: ignore[reportPrivateUsage]
    await TenantRoles(client=client, reads=reads).ensure_tenant_admin_roles(ctx)
    # After creating its claim the tenant lists the claims to see who else claims its Gateway.
    api.on("GET", f"/api/v1/namespaces/{NS}/configmaps", listing([], "1", kind="ConfigMapList"))
    await GatewayClaims(client=client, reads=reads, namespace=NS).ensure_gateway_claim(ctx)
    created = api.created()
    assert sorted(body["kind"] for body in created) == [
        "ConfigMap",
        "MaasTenantConfig",
        "Namespace",
        "Role",
        "Role",
    ]
    assert [body["kind"] for body in created if not kept(body)] == []


async def test_the_default_tenant_and_config_are_kept_by_juju() -> None:
    api = AcceptsEveryCreate()
    bootstrap = DefaultTenantBootstrap(client=api.client(), settings=SETTINGS)
    config = await bootstrap.create_config()
    await bootstrap.create_tenant(config)
    created = api.created()
    assert [body["kind"] for body in created] == ["Config", "AITenant"]
    assert [body["kind"] for body in created if not kept(body)] == []


async def test_the_aitenant_namespace_the_controller_creates_is_kept_by_juju() -> None:
    api = AcceptsEveryCreate()
    await ensure_managed_namespace(api.client(), NS)
    [namespace] = api.created()
    assert namespace["kind"] == "Namespace"
    assert kept(namespace)
