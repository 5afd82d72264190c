"""The CRDs' schemas as the real API server applies them: defaults, ranges, enums, pruning of
what they do not describe, and CEL rules left out where the server does not evaluate them."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube import ApiError, AsyncClient
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from aitenant import cluster_manifests, contract
from aitenant.resources import AITenant, Config, LegacyTenant, MaasTenantConfig
from tests.harness import samples

from .conftest import AITENANT_NS, Names

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


async def test_config_is_typed_and_has_its_short_name(kube: AsyncClient) -> None:
    # Another name than the shared Config/default: this module registers no webhook, and this
    # API server does not evaluate the CRD's CEL name rule.
    document = body("Config", "schema-probe", None, {"usageLogging": True, "x": 1})
    obj = await stored(kube, Config, document)
    assert obj["spec"] == {"usageLogging": True, "limitadorScrapeInterval": "30s"}
    message = await refusal(
        kube, Config, body("Config", "schema-probe", None, {"limitadorScrapeInterval": "soon"})
    )
    assert "spec.limitadorScrapeInterval" in message
    crd = await kube.get(CustomResourceDefinition, "configs.maas.opendatahub.io")
    assert crd.spec.names.shortNames == ["maasconfig"]


async def test_rbac_admins_need_kind_and_name(kube: AsyncClient, unique: Names) -> None:
    document = samples.aitenant(unique("admins"), AITENANT_NS, rbac_admins=[{"name": "alice"}])
    assert "spec.rbac.admins.kind: Required value" in await refusal(kube, AITenant, document)


async def test_cel_rules_are_left_out_on_this_api_server(kube: AsyncClient) -> None:
    version = await samples.server_version(kube)
    assert not cluster_manifests.supports_cel(version), "this suite runs a 1.20 API server"
    shipped = {d["metadata"]["name"]: d for d in cluster_manifests.crd_documents((1, 30))}
    for name, document in shipped.items():
        installed = (await kube.get(CustomResourceDefinition, name)).to_dict()
        schema = installed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert "x-kubernetes-validations" in str(document), name
        assert "x-kubernetes-validations" not in str(schema), name
        # Everything else of the shipped schema is what the API server serves.
        assert schema["properties"].keys() == (
            document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"].keys()
        )
