"""Helpers of the tenant platform e2e tests (test_platform.py, test_platform_edits.py): where
a tenant's platform objects live, what it should hold, reading them back, reaching the
config reconciler, and the route-level AuthPolicy an older version rendered.
"""

from __future__ import annotations

from typing import Any, cast

from lightkube import ApiError, AsyncClient

from aitenant import contract
from aitenant.controllers.tenant_config.reconciler import TenantConfigReconciler
from aitenant.platform import kinds
from aitenant.resources import MaasTenantConfig
from aitenant.runtime.control.controller import Key

from ..harness import (
    GATEWAY_NS,
    INFRA_NS,
    RunningController,
    eventually,
)
from ..tenants import ready

CONFIG = "default-tenant"


# The smallest AuthPolicy rules Kuadrant's schema accepts (it needs at least one rule).
ALLOW_ALL: dict[str, Any] = {"authorization": {"allow": {"opa": {"rego": "allow = true"}}}}


# Where a tenant's platform objects live.
SCOPES: list[tuple[kinds.Kind, str | None]] = [
    (kinds.SERVICE_ACCOUNT, INFRA_NS),
    (kinds.SECRET, INFRA_NS),
    (kinds.ROLE, INFRA_NS),
    (kinds.ROLE_BINDING, INFRA_NS),
    (kinds.DEPLOYMENT, INFRA_NS),
    (kinds.SERVICE, INFRA_NS),
    (kinds.NETWORK_POLICY, INFRA_NS),
    (kinds.HTTP_ROUTE, INFRA_NS),
    (kinds.CONFIG_MAP, INFRA_NS),
    (kinds.BACKEND_TLS_POLICY, INFRA_NS),
    (kinds.AUTH_POLICY, INFRA_NS),
    (kinds.CRONJOB, INFRA_NS),
    (kinds.TOKEN_RATE_LIMIT_POLICY, GATEWAY_NS),
    (kinds.AUTH_POLICY, GATEWAY_NS),
    (kinds.TELEMETRY_POLICY, GATEWAY_NS),
    (kinds.CLUSTER_ROLE_BINDING, None),
]


async def get(kube: AsyncClient, kind: kinds.Kind, name: str, namespace: str | None) -> Any:
    if kind.namespaced:
        return dict(await kube.get(kind.resource, name, namespace=namespace))
    return dict(await kube.get(kind.resource, name))


async def absent(kube: AsyncClient, kind: kinds.Kind, name: str, namespace: str | None) -> bool:
    try:
        await get(kube, kind, name, namespace)
    except ApiError as exc:
        return exc.status.code == 404
    return False


async def platform_of(kube: AsyncClient, tenant: str) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of every object carrying the tenant's tracking labels."""
    found = set()
    for kind, namespace in SCOPES:
        labels: dict[str, Any] = {contract.LABEL_TENANT_NAME: tenant}
        if kind.namespaced:
            listing = kube.list(kind.resource, namespace=namespace, labels=labels)
        else:
            listing = kube.list(kind.resource, labels=labels)
        async for obj in listing:
            found.add((kind.kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
    return found


async def get_config(kube: AsyncClient, tenant: str) -> dict[str, Any]:
    return dict(await kube.get(MaasTenantConfig, CONFIG, namespace=f"ai-tenant-{tenant}"))


async def config_with_reason(kube: AsyncClient, tenant: str, reason: str) -> dict[str, Any]:
    """The tenant's config once its Ready condition has ``reason``."""

    async def reported() -> dict[str, Any] | None:
        config = await get_config(kube, tenant)
        return config if ready(config).get("reason") == reason else None

    return await eventually(reported)


def reconciler_of(controller: RunningController) -> TenantConfigReconciler:
    assert controller.app is not None
    bound: Any = controller.app.config_controller.reconcile
    return cast(TenantConfigReconciler, bound.__self__)


async def reconcile_config(controller: RunningController, tenant: str) -> None:
    assert controller.app is not None
    await controller.app.config_controller.process(Key(f"ai-tenant-{tenant}", CONFIG))


def expected_platform(tenant: str) -> set[tuple[str, str, str]]:
    return {
        ("ServiceAccount", INFRA_NS, f"maas-api-{tenant}"),
        ("Secret", INFRA_NS, f"maas-api-{tenant}-serving-cert"),
        ("Role", INFRA_NS, f"maas-api-{tenant}-db-secret"),
        ("RoleBinding", INFRA_NS, f"maas-api-{tenant}-db-secret"),
        ("Deployment", INFRA_NS, f"maas-api-{tenant}"),
        ("Service", INFRA_NS, f"maas-api-{tenant}"),
        ("NetworkPolicy", INFRA_NS, f"maas-api-{tenant}"),
        ("NetworkPolicy", INFRA_NS, f"maas-key-cleanup-{tenant}"),
        ("HTTPRoute", INFRA_NS, f"maas-api-route-{tenant}"),
        # The e2e cluster serves BackendTLSPolicy (Gateway API's standard CRDs).
        ("ConfigMap", INFRA_NS, f"maas-api-{tenant}-backend-ca"),
        ("BackendTLSPolicy", INFRA_NS, f"maas-api-{tenant}"),
        ("CronJob", INFRA_NS, f"maas-api-key-cleanup-{tenant}"),
        ("TokenRateLimitPolicy", GATEWAY_NS, f"gateway-default-deny-{tenant}"),
        ("AuthPolicy", GATEWAY_NS, f"{tenant}-maas-auth"),
        ("ClusterRoleBinding", "", f"maas-api-{tenant}"),
    }


def old_route_auth_policy(name: str, *, unmanaged: bool = False) -> dict[str, Any]:
    """The route-level AuthPolicy an older version rendered for a tenant."""
    meta: dict[str, Any] = {
        "name": f"maas-api-auth-policy-{name}",
        "namespace": INFRA_NS,
        "labels": {
            "app.kubernetes.io/managed-by": "aitenant-controller",
            "app.kubernetes.io/part-of": "models-as-a-service",
            contract.LABEL_TENANT_NAME: name,
            contract.LABEL_TENANT_NAMESPACE: f"ai-tenant-{name}",
        },
    }
    if unmanaged:
        meta["annotations"] = {"opendatahub.io/managed": "false"}
    return {
        "apiVersion": "kuadrant.io/v1",
        "kind": "AuthPolicy",
        "metadata": meta,
        "spec": {
            "targetRef": {
                "group": "gateway.networking.k8s.io",
                "kind": "HTTPRoute",
                "name": f"maas-api-route-{name}",
            },
            "rules": ALLOW_ALL,
        },
    }


AITENANT_KIND = kinds.Kind(contract.API_VERSION, "AITenant", "aitenants")


CONFIG_KIND = kinds.Kind(contract.API_VERSION, "MaasTenantConfig", "maastenantconfigs")
