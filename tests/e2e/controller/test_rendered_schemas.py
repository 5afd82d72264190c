"""Everything the platform renders, checked by the real schemas (Gateway API, Kuadrant and the
built-in kinds) with strict field validation: a field the schema does not know is refused here
instead of being pruned silently in a cluster."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest
import trustme
from devtools import samples
from lightkube import AsyncClient

from aitenant import certificates, contract
from aitenant.platform.discovery import discovery_path
from aitenant.platform.render import Manifest, PlatformContext, Telemetry, render
from aitenant.runtime.client.lightkube_private import http_client

from ..harness import AITENANT_NS, GATEWAY_NS, INFRA_NS
from ..tenants import Names

pytestmark = pytest.mark.e2e


def base_context(tenant: str) -> PlatformContext:
    authority = trustme.CA()
    ca = certificates.CertificateAuthority(
        authority.cert_pem.bytes().decode(), authority.private_key_pem.bytes().decode()
    )
    names = certificates.dns_names(f"maas-api-{tenant}", INFRA_NS)
    serving = certificates.issue(ca, names, now=dt.datetime.now(dt.UTC))
    return PlatformContext(
        tenant=tenant,
        tenant_namespace=f"ai-tenant-{tenant}",
        aitenant_namespace=AITENANT_NS,
        infra_namespace=INFRA_NS,
        gateway_namespace=GATEWAY_NS,
        gateway_name=tenant,
        default_gateway_name="maas-default-gateway",
        controller_namespace=INFRA_NS,
        image="quay.io/opendatahub/maas-api:latest",
        cleanup_image="docker.io/curlimages/curl:8.11.1",
        replicas=1,
        serving_cert=serving,
        backend_ca_pem=ca.cert_pem,  # the e2e cluster serves BackendTLSPolicy: render it
    )


def collection_path(manifest: Manifest) -> str:
    kind = manifest.kind
    base = discovery_path(kind.api_version)
    if not kind.namespaced:
        return f"{base}/{kind.plural}"
    return f"{base}/namespaces/{manifest.namespace}/{kind.plural}"


async def strict_dry_run(kube: AsyncClient, manifest: Manifest) -> tuple[int, str]:
    response = await http_client(kube).post(
        collection_path(manifest),
        json=manifest.obj,
        params={"dryRun": "All", "fieldValidation": "Strict"},
    )
    return response.status_code, response.text


VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {},
    "every telemetry dimension": {
        "telemetry": Telemetry(organization=True, user=True, group=True, model_usage=True)
    },
    "replicas, expiry and Authorino namespaces": {
        "replicas": 3,
        "max_expiration_days": 7,
        "authorino_namespaces": ("kuadrant-system",),
    },
}


@pytest.mark.parametrize("variant", list(VARIANTS))
async def test_every_rendered_object_passes_strict_validation(
    kube: AsyncClient, unique: Names, variant: str
) -> None:
    tenant = unique("render")
    ctx = dataclasses.replace(base_context(tenant), **VARIANTS[variant])
    await samples.ensure_namespace(kube, ctx.tenant_namespace)
    manifests = render(ctx)
    assert {m.kind.kind for m in manifests} >= {
        "Deployment",
        "HTTPRoute",
        "CronJob",
        "AuthPolicy",
        "BackendTLSPolicy",
        "ConfigMap",
    }
    refused = {}
    for manifest in manifests:
        code, text = await strict_dry_run(kube, manifest)
        if code != 201:
            refused[str(manifest)] = text
    assert not refused, refused


async def test_the_default_tenants_objects_pass_strict_validation(kube: AsyncClient) -> None:
    # Unsuffixed legacy names on the default Gateway (a dry run: nothing is stored).
    ctx = dataclasses.replace(
        base_context(contract.DEFAULT_TENANT_NAME),
        tenant_namespace=contract.DEFAULT_SUBSCRIPTION_NAMESPACE,
        gateway_name="maas-default-gateway",
        telemetry=Telemetry(),
    )
    await samples.ensure_namespace(kube, ctx.tenant_namespace)
    for manifest in render(ctx):
        code, text = await strict_dry_run(kube, manifest)
        # 409: a real default tenant's object of that name may exist; it passed validation.
        assert code in (201, 409), text


async def test_a_misspelt_field_is_refused_not_pruned(kube: AsyncClient, unique: Names) -> None:
    # The check above would catch the mistakes a real schema silently prunes.
    ctx = base_context(unique("misspelt"))
    route = next(m for m in render(ctx) if m.kind.kind == "HTTPRoute")
    route.obj["spec"]["parentRef"] = route.obj["spec"]["parentRefs"][0]
    code, text = await strict_dry_run(kube, route)
    assert code == 400
    assert 'unknown field \\"spec.parentRef\\"' in text, text
