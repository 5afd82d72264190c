"""The CRDs' schemas as the real API server applies them: defaults, ranges, enums, pruning of
what they do not describe, and their CEL rules, evaluated by the API server itself."""

from __future__ import annotations

from typing import Any

import pytest
from devtools import samples
from lightkube import ApiError, AsyncClient
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from aitenant import contract, manifests
from aitenant.resources import AITenant, Config, LegacyTenant, MaasTenantConfig

from ..harness import AITENANT_NS
from ..tenants import Names

pytestmark = pytest.mark.e2e


def body(kind: str, name: str, namespace: str | None, spec: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": contract.API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


async def stored(kube: AsyncClient, resource: Any, document: dict[str, Any]) -> dict[str, Any]:
    """What the API server would store (a dry-run create: defaulted and pruned, not kept)."""
    return dict(await kube.create(resource.from_dict(document), dry_run=True))


async def refusal(kube: AsyncClient, resource: Any, document: dict[str, Any]) -> str:
    with pytest.raises(ApiError) as info:
        await kube.create(resource.from_dict(document), dry_run=True)
    assert info.value.status.code == 422
    return info.value.status.message or ""


async def test_tenant_config_is_defaulted_and_pruned(kube: AsyncClient, unique: Names) -> None:
    namespace = unique("schema-mtc")
    await samples.ensure_namespace(kube, namespace)
    spec = {
        "apiKeys": {"maxExpirationDays": 5, "rotate": True},
        "telemetry": {"metrics": {"captureUser": True}},
        "payloadProcessing": {"autoscaling": {}},
        "gatewayRef": {"name": "not-a-config-field"},
    }
    obj = await stored(
        kube, MaasTenantConfig, body("MaasTenantConfig", "default-tenant", namespace, spec)
    )
    assert obj["spec"] == {
        "apiKeys": {"maxExpirationDays": 5},
        "telemetry": {
            "enabled": True,
            "metrics": {
                "captureUser": True,
                "captureGroup": False,
                "captureOrganization": True,
                "captureModelUsage": True,
            },
        },
        "payloadProcessing": {
            "autoscaling": {
                "maxReplicas": 10,
                "targetCPUUtilization": 70,
                "targetMemoryUtilization": 80,
            }
        },
    }


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"apiKeys": {"maxExpirationDays": 0}}, "spec.apiKeys.maxExpirationDays"),
        ({"payloadProcessing": {"replicas": 101}}, "spec.payloadProcessing.replicas"),
        ({"telemetry": {"enabled": "yes"}}, "spec.telemetry.enabled"),
    ],
)
async def test_tenant_config_ranges_and_types(
    kube: AsyncClient, unique: Names, spec: dict[str, Any], field: str
) -> None:
    namespace = unique("schema-range")
    await samples.ensure_namespace(kube, namespace)
    document = body("MaasTenantConfig", "default-tenant", namespace, spec)
    assert field in await refusal(kube, MaasTenantConfig, document)


async def test_legacy_tenant_is_typed_like_upstream(kube: AsyncClient, unique: Names) -> None:
    namespace = unique("schema-tenant")
    await samples.ensure_namespace(kube, namespace)
    spec = {"externalOIDC": {"issuerUrl": "https://idp.example/r", "clientId": "c"}, "x": 1}
    obj = await stored(kube, LegacyTenant, body("Tenant", "default-tenant", namespace, spec))
    assert obj["spec"] == {
        "externalOIDC": {"issuerUrl": "https://idp.example/r", "clientId": "c", "ttl": 300}
    }
    short_ttl = {"externalOIDC": {"issuerUrl": "https://idp.example/r", "clientId": "c", "ttl": 5}}
    message = await refusal(
        kube, LegacyTenant, body("Tenant", "default-tenant", namespace, short_ttl)
    )
    assert "spec.externalOIDC.ttl" in message


async def stored_config(kube: AsyncClient, spec: dict[str, Any]) -> dict[str, Any]:
    """What the API server would store for Config/default with ``spec`` (a dry run: a create,
    or a replace where another test's Config/default exists)."""
    document = body("Config", contract.CONFIG_NAME, None, spec)
    try:
        return await stored(kube, Config, document)
    except ApiError as exc:
        if exc.status.code != 409:
            raise
    live = dict(await kube.get(Config, contract.CONFIG_NAME))
    document["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
    return dict(await kube.replace(Config.from_dict(document), dry_run=True))


async def test_config_is_typed_and_has_its_short_name(kube: AsyncClient) -> None:
    obj = await stored_config(kube, {"usageLogging": True, "x": 1})
    assert obj["spec"] == {"usageLogging": True, "limitadorScrapeInterval": "30s"}
    with pytest.raises(ApiError) as info:
        await stored_config(kube, {"limitadorScrapeInterval": "soon"})
    assert info.value.status.code == 422
    assert "spec.limitadorScrapeInterval" in (info.value.status.message or "")
    crd = await kube.get(CustomResourceDefinition, "configs.maas.opendatahub.io")
    assert crd.spec.names.shortNames == ["maasconfig"]


async def test_rbac_admins_need_kind_and_name(kube: AsyncClient, unique: Names) -> None:
    document = samples.aitenant(unique("admins"), AITENANT_NS, rbac_admins=[{"name": "alice"}])
    assert "spec.rbac.admins[0].kind: Required value" in await refusal(kube, AITenant, document)


async def no_webhook_of_ours(kube: AsyncClient) -> None:
    """Refusals seen now come from the API server's schema checks: no admission webhook of
    ours is registered."""
    async for config in kube.list(ValidatingWebhookConfiguration):
        for webhook in config.webhooks or []:
            groups = {g for rule in webhook.rules or [] for g in rule.apiGroups or []}
            assert contract.GROUP not in groups, config.metadata and config.metadata.name


AITENANT_TOO_LONG = (
    "AITenant name must be at most 41 characters (required for per-tenant resource naming with "
    "63-character Kubernetes limit)"
)
AITENANT_NOT_A_LABEL = (
    "AITenant name must be a valid DNS-1123 label (lowercase alphanumeric and hyphens, starting "
    "and ending with alphanumeric)"
)


@pytest.mark.parametrize(
    ("resource", "kind", "name", "namespaced", "message"),
    [
        (AITenant, "AITenant", "a" * 42, True, AITENANT_TOO_LONG),
        (AITenant, "AITenant", "bad.name", True, AITENANT_NOT_A_LABEL),
        (
            MaasTenantConfig,
            "MaasTenantConfig",
            "extra",
            True,
            "MaasTenantConfig name must be default-tenant",
        ),
        (LegacyTenant, "Tenant", "extra", True, "Tenant name must be default-tenant"),
        (Config, "Config", "extra", False, "Config name must be default"),
    ],
)
async def test_the_api_server_evaluates_our_cel_rules(
    kube: AsyncClient,
    unique: Names,
    resource: Any,
    kind: str,
    name: str,
    namespaced: bool,
    message: str,
) -> None:
    await no_webhook_of_ours(kube)
    namespace = None
    if namespaced:
        namespace = AITENANT_NS if kind == "AITenant" else unique("cel")
        await samples.ensure_namespace(kube, namespace)
    answer = await refusal(kube, resource, body(kind, name, namespace, {}))
    assert message in answer


async def test_installed_schemas_are_the_shipped_ones_cel_rules_included(
    kube: AsyncClient,
) -> None:
    shipped = {d["metadata"]["name"]: d for d in manifests.crd_documents()}
    for name, document in shipped.items():
        installed = (await kube.get(CustomResourceDefinition, name)).to_dict()
        schema = installed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert "x-kubernetes-validations" in schema, name
        assert schema == document["spec"]["versions"][0]["schema"]["openAPIV3Schema"], name
