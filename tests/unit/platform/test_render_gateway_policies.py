"""Rendering of the tenant platform's policies about its traffic (docs/platform.md): the
TokenRateLimitPolicy, the TelemetryPolicy and its labels, the BackendTLSPolicy. Pure: no
cluster.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from cryptography import x509

from aitenant.platform.render import (
    PlatformContext,
    Telemetry,
    render,
)

from .conftest import GATEWAY_NS, INFRA, MakeContext, default_tenant
from .rendered import (
    objects,
    one,
)


def test_token_rate_limit_policy_denies_what_maas_api_does_not_serve(
    make_ctx: MakeContext,
) -> None:
    spec = one(make_ctx(), "TokenRateLimitPolicy")["spec"]
    assert spec["targetRef"]["name"] == "red-team"
    limit = spec["defaults"]["limits"]["deny-all-by-default"]
    assert limit["rates"] == [{"limit": 0, "window": "1m"}]
    assert limit["counters"] == [{"expression": "auth.identity.userid"}]
    assert [w["predicate"] for w in limit["when"]] == [
        f'!request.path.startsWith("{p}")'
        for p in ("/maas-api", "/v1/models", "/v1/subscriptions", "/v1/api-keys")
    ]


def telemetry_labels_of(ctx: PlatformContext) -> dict[str, str]:
    policy = objects(ctx)[("TelemetryPolicy", "maas-telemetry-red-team")]
    return policy["spec"]["metrics"]["default"]["labels"]


ALWAYS = {
    "subscription": "auth.identity.selected_subscription",
    "cost_center": (
        "has(auth.identity.subscription_info.costCenter) ? "
        'auth.identity.subscription_info.costCenter : ""'
    ),
}


ORGANIZATION = {
    "organization_id": (
        "has(auth.identity.subscription_info.organizationId) ? "
        'auth.identity.subscription_info.organizationId : ""'
    )
}


MODEL = {"model": 'responseBodyJSON("/model")'}


USER = {"user": "auth.identity.userid"}


GROUP = {"group": "auth.identity.groups_str"}


def test_telemetry_policy_only_with_telemetry(make_ctx: MakeContext) -> None:
    assert ("TelemetryPolicy", "maas-telemetry-red-team") not in objects(make_ctx())
    policy = objects(make_ctx(telemetry=Telemetry()))[
        ("TelemetryPolicy", "maas-telemetry-red-team")
    ]
    assert policy["metadata"]["namespace"] == GATEWAY_NS
    assert policy["metadata"]["labels"]["app.kubernetes.io/part-of"] == "maas-observability"
    assert policy["metadata"]["labels"]["maas.opendatahub.io/tenant-name"] == "red-team"
    assert policy["spec"]["targetRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": "red-team",
    }


def test_backend_tls_only_where_the_api_server_serves_it(make_ctx: MakeContext) -> None:
    kinds_rendered = {m.kind.kind for m in render(make_ctx())}
    assert not kinds_rendered & {"BackendTLSPolicy", "ConfigMap"}
    ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    added = set(objects(make_ctx(backend_ca_pem=ca))) - set(objects(make_ctx()))
    assert added == {
        ("ConfigMap", "maas-api-red-team-backend-ca"),
        ("BackendTLSPolicy", "maas-api-red-team"),
    }


@pytest.mark.parametrize("default", [False, True])
def test_backend_tls_policy_checks_the_serving_certificate(
    make_ctx: MakeContext, serving: Any, default: bool
) -> None:
    ctx = default_tenant(make_ctx) if default else make_ctx()
    ctx = dataclasses.replace(ctx, backend_ca_pem=serving.ca_pem)
    api = "maas-api" if default else "maas-api-red-team"
    policy = one(ctx, "BackendTLSPolicy")
    config_map = one(ctx, "ConfigMap")
    assert policy["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert policy["metadata"]["name"] == api
    assert policy["metadata"]["namespace"] == INFRA
    # The Service the HTTPRoute sends to, as a whole (it has the one HTTPS port).
    assert policy["spec"]["targetRefs"] == [{"group": "", "kind": "Service", "name": api}]
    service = one(ctx, "Service")
    assert service["metadata"]["name"] == api
    assert [p["port"] for p in service["spec"]["ports"]] == [8443]
    route = one(ctx, "HTTPRoute")
    assert {b["name"] for r in route["spec"]["rules"] for b in r["backendRefs"]} == {api}
    validation = policy["spec"]["validation"]
    assert validation == {
        "hostname": f"{api}.{INFRA}.svc",
        "caCertificateRefs": [
            {"group": "", "kind": "ConfigMap", "name": config_map["metadata"]["name"]}
        ],
    }
    assert config_map["metadata"] == {
        "name": f"{api}-backend-ca",
        "namespace": INFRA,
        "labels": config_map["metadata"]["labels"],
    }
    assert config_map["data"] == {"ca.crt": serving.ca_pem}
    # The name the Gateway checks is one the certificate it will be shown carries, and the
    # CA it trusts is the one that signed it.
    if not default:
        cert = x509.load_pem_x509_certificate(serving.cert_pem.encode())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert validation["hostname"] in san.get_values_for_type(x509.DNSName)
        ca = x509.load_pem_x509_certificate(config_map["data"]["ca.crt"].encode())
        cert.verify_directly_issued_by(ca)


@pytest.mark.parametrize(
    ("telemetry", "expected"),
    [
        # Upstream's defaults: organization and model on, user and group off.
        (Telemetry(), {**ALWAYS, **ORGANIZATION, **MODEL}),
        (Telemetry(organization=False), {**ALWAYS, **MODEL}),
        (Telemetry(model_usage=False), {**ALWAYS, **ORGANIZATION}),
        (Telemetry(user=True), {**ALWAYS, **ORGANIZATION, **USER, **MODEL}),
        (Telemetry(group=True), {**ALWAYS, **ORGANIZATION, **GROUP, **MODEL}),
        (Telemetry(False, False, False, False), ALWAYS),
        (Telemetry(True, True, True, True), {**ALWAYS, **ORGANIZATION, **USER, **GROUP, **MODEL}),
    ],
)
def test_telemetry_labels_follow_each_switch(
    make_ctx: MakeContext, telemetry: Telemetry, expected: dict[str, str]
) -> None:
    assert telemetry_labels_of(make_ctx(telemetry=telemetry)) == expected
