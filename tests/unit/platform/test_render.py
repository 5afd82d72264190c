"""Rendering of the tenant platform (docs/differences.md D5, D6; docs/platform.md). Pure: no
cluster."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import pytest
from cryptography import x509

from aitenant.platform import render as render_module
from aitenant.platform.render import (
    TEMPLATE_FILES,
    PlatformContext,
    Telemetry,
    documents,
    names_for,
    parse_documents,
    render,
    template_variables,
)

from .conftest import GATEWAY_NS, INFRA, MakeContext, default_tenant

TRACKING = ("maas.opendatahub.io/tenant-name", "maas.opendatahub.io/tenant-namespace")


def objects(ctx: PlatformContext) -> dict[tuple[str, str], dict[str, Any]]:
    """Rendered objects by (kind, name)."""
    return {(m.kind.kind, m.name): m.obj for m in render(ctx)}


def one(ctx: PlatformContext, kind: str, namespace: str | None = None) -> dict[str, Any]:
    found = [
        m.obj
        for m in render(ctx)
        if m.kind.kind == kind and (namespace is None or m.namespace == namespace)
    ]
    assert len(found) == 1, [m.obj["metadata"]["name"] for m in render(ctx)]
    return found[0]


def env_of(deployment: dict[str, Any]) -> dict[str, Any]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_non_default_tenant_names_and_namespaces(make_ctx: MakeContext) -> None:
    rendered = {(m.kind.kind, m.namespace, m.name) for m in render(make_ctx())}
    assert rendered == {
        ("ServiceAccount", INFRA, "maas-api-red-team"),
        ("Secret", INFRA, "maas-api-red-team-serving-cert"),
        ("Deployment", INFRA, "maas-api-red-team"),
        ("Service", INFRA, "maas-api-red-team"),
        ("NetworkPolicy", INFRA, "maas-api-red-team"),
        ("NetworkPolicy", INFRA, "maas-key-cleanup-red-team"),
        ("ClusterRoleBinding", None, "maas-api-red-team"),
        ("HTTPRoute", INFRA, "maas-api-route-red-team"),
        ("CronJob", INFRA, "maas-api-key-cleanup-red-team"),
        ("TokenRateLimitPolicy", GATEWAY_NS, "gateway-default-deny-red-team"),
        ("AuthPolicy", GATEWAY_NS, "red-team-maas-auth"),
    }


def test_default_tenant_keeps_the_legacy_unsuffixed_names(make_ctx: MakeContext) -> None:
    rendered = {(m.kind.kind, m.namespace, m.name) for m in render(default_tenant(make_ctx))}
    assert rendered == {
        ("ServiceAccount", INFRA, "maas-api"),
        ("Secret", INFRA, "maas-api-serving-cert"),
        ("Deployment", INFRA, "maas-api"),
        ("Service", INFRA, "maas-api"),
        ("NetworkPolicy", INFRA, "maas-api"),
        ("NetworkPolicy", INFRA, "maas-key-cleanup"),
        ("ClusterRoleBinding", None, "maas-api"),
        ("HTTPRoute", INFRA, "maas-api-route"),
        ("CronJob", INFRA, "maas-api-key-cleanup"),
        ("TokenRateLimitPolicy", GATEWAY_NS, "gateway-default-deny"),
        ("AuthPolicy", GATEWAY_NS, "maas-gateway-auth"),
    }
    env = env_of(one(default_tenant(make_ctx), "Deployment"))
    assert env["TENANT_NAME"] == "models-as-a-service"
    assert env["MAAS_SUBSCRIPTION_NAMESPACE"] == "models-as-a-service"


def test_non_default_tenant_on_the_default_gateway_leaves_its_auth_policy_alone(
    make_ctx: MakeContext,
) -> None:
    ctx = make_ctx(gateway_name="maas-default-gateway")
    assert [
        m for m in render(ctx) if m.namespace == GATEWAY_NS and m.kind.kind == "AuthPolicy"
    ] == []
    assert (
        names_for("red-team", "maas-default-gateway", "maas-default-gateway").gateway_auth is None
    )


def test_only_the_gateway_auth_policy_is_create_only(make_ctx: MakeContext) -> None:
    create_only = [str(m) for m in render(make_ctx()) if m.create_only]
    assert create_only == [f"AuthPolicy {GATEWAY_NS}/red-team-maas-auth"]


@pytest.mark.parametrize("default", [False, True])
def test_every_object_carries_the_common_and_tracking_labels(
    make_ctx: MakeContext, default: bool
) -> None:
    ctx = default_tenant(make_ctx) if default else make_ctx()
    ctx = dataclasses.replace(ctx, backend_ca_pem="CA")  # the optional objects too
    for manifest in render(ctx):
        labels = manifest.obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/part-of"] == "models-as-a-service", manifest
        assert labels["app.kubernetes.io/managed-by"] == "aitenant-controller", manifest
        assert labels["app.kubernetes.io/name"] == "maas-api", manifest
        assert labels["maas.opendatahub.io/tenant-name"] == ctx.tenant, manifest
        assert labels["maas.opendatahub.io/tenant-namespace"] == ctx.tenant_namespace, manifest
        assert "ownerReferences" not in manifest.obj["metadata"], manifest  # docs/differences.md D6


def test_gateway_auth_policy_is_labelled_as_gateway_auth(make_ctx: MakeContext) -> None:
    policy = one(make_ctx(), "AuthPolicy", GATEWAY_NS)
    assert policy["metadata"]["labels"]["app.kubernetes.io/component"] == "gateway-auth"
    assert policy["spec"]["targetRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": "red-team",
    }


def test_deployment(make_ctx: MakeContext, serving: Any) -> None:
    ctx = make_ctx(replicas=3, max_expiration_days=30)
    deployment = one(ctx, "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 3
    selector = spec["selector"]["matchLabels"]
    assert selector == {
        "app.kubernetes.io/name": "maas-api",
        "maas.opendatahub.io/tenant-instance": "maas-api-red-team",
    }
    pod = spec["template"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert pod["metadata"]["annotations"] == {
        "maas.opendatahub.io/serving-cert-sha256": serving.pem_sha256
    }
    assert pod["spec"]["serviceAccountName"] == "maas-api-red-team"
    container = pod["spec"]["containers"][0]
    assert container["image"] == "quay.io/opendatahub/maas-api:v1"
    assert container["ports"] == [{"name": "https", "containerPort": 8443, "protocol": "TCP"}]
    assert env_of(deployment) == {
        "SECURE": "true",
        "TLS_CERT": "/etc/maas-api/tls/tls.crt",
        "TLS_KEY": "/etc/maas-api/tls/tls.key",
        "NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "MAAS_SUBSCRIPTION_NAMESPACE": "ai-tenant-red-team",
        "METRICS_PORT": "9090",
        "GATEWAY_NAMESPACE": GATEWAY_NS,
        "GATEWAY_NAME": "red-team",
        "API_KEY_MAX_EXPIRATION_DAYS": "30",
        "TENANT_NAME": "red-team",
        "AITENANT_NAME": "red-team",
        "AITENANT_NAMESPACE": "ai-tenants",
    }
    # A started maas-api is noticed within a second; a running one is probed as before
    # (every 10 s alive, every 5 s ready), and a minute to start, as the liveness delay gave.
    periods = {"startupProbe": 1, "livenessProbe": 10, "readinessProbe": 5}
    for probe, period in periods.items():
        assert container[probe]["httpGet"] == {
            "path": "/health",
            "port": "https",
            "scheme": "HTTPS",
        }
        assert container[probe]["periodSeconds"] == period
        assert "initialDelaySeconds" not in container[probe]
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] == 60
    # A stopping pod serves on for 5 s while the endpoints drop it, within the default 30 s
    # grace period (docs/platform.md §1).
    assert container["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    assert pod["spec"].get("terminationGracePeriodSeconds", 30) > 5
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["volumeMounts"] == [
        {"name": "maas-api-tls", "mountPath": "/etc/maas-api/tls", "readOnly": True}
    ]
    assert pod["spec"]["volumes"] == [
        {"name": "maas-api-tls", "secret": {"secretName": "maas-api-red-team-serving-cert"}}
    ]


def test_service_and_serving_secret(make_ctx: MakeContext, serving: Any) -> None:
    service = one(make_ctx(), "Service")
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 8443, "targetPort": "https", "protocol": "TCP"}
    ]
    assert service["spec"]["selector"]["maas.opendatahub.io/tenant-instance"] == (
        "maas-api-red-team"
    )
    secret = one(make_ctx(), "Secret")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["data"] == serving.secret_data()


def test_route_attaches_to_the_tenant_gateway(make_ctx: MakeContext) -> None:
    route = one(make_ctx(), "HTTPRoute")
    assert route["spec"]["parentRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": "red-team",
            "namespace": GATEWAY_NS,
        }
    ]
    # What each rule matches: test_route.py.
    rules = route["spec"]["rules"]
    assert rules
    for rule in rules:
        assert rule["backendRefs"] == [{"name": "maas-api-red-team", "port": 8443}]


def test_no_route_level_auth_policy(make_ctx: MakeContext) -> None:
    # It would override the Gateway AuthPolicy's defaults for the maas-api route.
    for ctx in (
        make_ctx(),
        default_tenant(make_ctx),
        make_ctx(gateway_name="maas-default-gateway"),
    ):
        assert [
            m for m in render(ctx) if m.kind.kind == "AuthPolicy" and m.namespace == INFRA
        ] == []


def test_values_cannot_change_the_document_structure(make_ctx: MakeContext) -> None:
    hostile = 'quay.io/evil:1"\n  injected: true\n#'
    deployment = one(make_ctx(image=hostile), "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == hostile
    assert "injected" not in deployment["spec"]


def test_cronjob(make_ctx: MakeContext) -> None:
    cronjob = one(make_ctx(), "CronJob")
    assert cronjob["apiVersion"] == "batch/v1"
    spec = cronjob["spec"]
    assert spec["schedule"] == "*/15 * * * *"
    assert spec["concurrencyPolicy"] == "Forbid"
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 3)
    job = spec["jobTemplate"]["spec"]
    assert (job["activeDeadlineSeconds"], job["backoffLimit"]) == (60, 2)
    pod = job["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    container = pod["containers"][0]
    assert container["image"] == "docker.io/curlimages/curl:8.11.1"
    assert container["args"][-1] == (
        f"https://maas-api-red-team.{INFRA}.svc:8443/internal/v1/api-keys/cleanup"
    )
    assert "/etc/maas-api/ca/ca.crt" in container["args"]
    assert pod["volumes"][0]["secret"]["secretName"] == "maas-api-red-team-serving-cert"
    labels = job["template"]["metadata"]["labels"]
    assert labels["maas.opendatahub.io/tenant-instance"] == "maas-key-cleanup-red-team"


def test_forty_one_character_tenant_fits_every_limit(make_ctx: MakeContext) -> None:
    tenant = "a" * 20 + "-" + "b" * 20
    assert len(tenant) == 41
    ctx = make_ctx(
        tenant=tenant,
        tenant_namespace=f"ai-tenant-{tenant}",
        gateway_name="gw",
        backend_ca_pem="CA",
    )
    manifests = render(ctx)
    for manifest in manifests:
        limit = 52 if manifest.kind.kind == "CronJob" else 63
        assert len(manifest.name) <= limit, manifest
    cronjob = next(m for m in manifests if m.kind.kind == "CronJob")
    digest = hashlib.sha256(tenant.encode()).hexdigest()[:16]
    # 21 + 41 > 52: truncated to the budget (52 - 21 - 16 - 1 = 14), trimmed, hashed (64 bits).
    assert cronjob.name == f"maas-api-key-cleanup-{'a' * 14}-{digest}"
    assert len(cronjob.name) == 52
    names = {m.name for m in manifests}
    assert f"maas-api-{tenant}-serving-cert" in names  # exactly 63
    assert f"maas-api-{tenant}-backend-ca" in names  # 61


def test_cronjob_name_within_limit_is_not_hashed(make_ctx: MakeContext) -> None:
    tenant = "t" * 31  # 21 + 31 = 52
    ctx = make_ctx(tenant=tenant, tenant_namespace=f"ai-tenant-{tenant}")
    assert one(ctx, "CronJob")["metadata"]["name"] == f"maas-api-key-cleanup-{tenant}"


def test_a_63_character_gateway_name_renders_every_name_within_63(make_ctx: MakeContext) -> None:
    """A Gateway name is any DNS label; ``<gw>-maas-auth`` once failed past 53 characters."""
    gateway = "g" * 63
    manifests = render(make_ctx(gateway_name=gateway))
    policy = next(m for m in manifests if m.kind.kind == "AuthPolicy")
    assert policy.name.startswith("g" * 44 + "-maas-auth-")
    assert all(len(m.name) <= 63 for m in manifests)


def test_network_policy_admits_gateway_controller_cleanup_and_authorino(
    make_ctx: MakeContext,
) -> None:
    spec = objects(make_ctx())[("NetworkPolicy", "maas-api-red-team")]["spec"]
    assert spec["podSelector"]["matchLabels"]["maas.opendatahub.io/tenant-instance"] == (
        "maas-api-red-team"
    )
    assert spec["policyTypes"] == ["Ingress"]
    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"port": 8443, "protocol": "TCP"}]
    peers = rule["from"]
    # By default only the pods the implementation labels with the tenant's Gateway
    # (docs/differences.md D37).
    assert peers[0] == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": GATEWAY_NS}},
        "podSelector": {"matchLabels": {"gateway.networking.k8s.io/gateway-name": "red-team"}},
    }
    # With no --controller-pod-selector, every pod of the controller's namespace but the
    # maas-api and cleanup pods, which may be other tenants'.
    assert peers[1] == {
        "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": "aitenant-controller"}
        },
        "podSelector": {"matchExpressions": [NOT_MAAS_API]},
    }
    assert peers[2] == {
        "podSelector": {
            "matchLabels": {"maas.opendatahub.io/tenant-instance": "maas-key-cleanup-red-team"}
        }
    }
    # Authorino only from the named namespaces (upstream's three by default).
    assert peers[3] == {
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "In",
                    "values": ["kuadrant-system", "openshift-operators", "rh-connectivity-link"],
                }
            ]
        },
        "podSelector": {"matchLabels": {"authorino-resource": "authorino"}},
    }
    assert len(peers) == 4


NOT_MAAS_API = {
    "key": "app.kubernetes.io/name",
    "operator": "NotIn",
    "values": ["maas-api", "maas-api-cleanup"],
}


def test_network_policy_admits_exactly_the_pods_selected(make_ctx: MakeContext) -> None:
    ctx = make_ctx(
        controller_pod_labels=(("app.kubernetes.io/name", "aitenant-k8s"), ("tier", "ops")),
        gateway_pod_labels=(("example.org/gw", "{gateway}"), ("example.org/role", "proxy")),
    )
    peers = objects(ctx)[("NetworkPolicy", "maas-api-red-team")]["spec"]["ingress"][0]["from"]
    assert peers[0] == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": GATEWAY_NS}},
        "podSelector": {"matchLabels": {"example.org/gw": "red-team", "example.org/role": "proxy"}},
    }
    # The maas-api exclusion stays: a selector that happened to match them admits none.
    assert peers[1]["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "aitenant-k8s", "tier": "ops"},
        "matchExpressions": [NOT_MAAS_API],
    }
    # The tenant's own cleanup pods and Authorino are unchanged.
    assert peers[2]["podSelector"]["matchLabels"] == {
        "maas.opendatahub.io/tenant-instance": "maas-key-cleanup-red-team"
    }
    assert len(peers) == 4


def test_empty_gateway_selector_admits_the_whole_gateway_namespace(make_ctx: MakeContext) -> None:
    peers = objects(make_ctx(gateway_pod_labels=()))[("NetworkPolicy", "maas-api-red-team")]
    assert peers["spec"]["ingress"][0]["from"][0] == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": GATEWAY_NS}}
    }


def test_default_tenant_admits_the_default_gateways_pods(make_ctx: MakeContext) -> None:
    ctx = default_tenant(make_ctx)
    peers = objects(ctx)[("NetworkPolicy", "maas-api")]["spec"]["ingress"][0]["from"]
    assert peers[0]["podSelector"] == {
        "matchLabels": {"gateway.networking.k8s.io/gateway-name": "maas-default-gateway"}
    }


def test_network_policy_takes_the_authorino_namespaces_given(make_ctx: MakeContext) -> None:
    ctx = make_ctx(authorino_namespaces=("my-authorino",))
    peers = objects(ctx)[("NetworkPolicy", "maas-api-red-team")]["spec"]["ingress"][0]["from"]
    expression = peers[3]["namespaceSelector"]["matchExpressions"][0]
    assert expression["values"] == ["my-authorino"]


@pytest.mark.parametrize("default", [False, True])
def test_cleanup_pods_reach_only_their_maas_api_and_dns(
    make_ctx: MakeContext, default: bool
) -> None:
    ctx = default_tenant(make_ctx) if default else make_ctx()
    suffix = "" if default else "-red-team"
    policy = objects(ctx)[("NetworkPolicy", f"maas-key-cleanup{suffix}")]
    cronjob = one(ctx, "CronJob")
    pod_labels = cronjob["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    spec = policy["spec"]
    assert spec["podSelector"] == {
        "matchLabels": {"maas.opendatahub.io/tenant-instance": f"maas-key-cleanup{suffix}"}
    }
    assert spec["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in spec  # Ingress with no rule: nothing may reach a cleanup pod
    to_api, dns = spec["egress"]
    api_labels = one(ctx, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert to_api == {
        "to": [
            {
                "podSelector": {
                    "matchLabels": {
                        "app.kubernetes.io/name": "maas-api",
                        "maas.opendatahub.io/tenant-instance": f"maas-api{suffix}",
                    }
                }
            }
        ],
        "ports": [{"port": 8443, "protocol": "TCP"}],
    }
    assert to_api["to"][0]["podSelector"]["matchLabels"].items() <= api_labels.items()
    assert dns == {
        "ports": [
            {"port": 53, "protocol": "UDP"},
            {"port": 53, "protocol": "TCP"},
            {"port": 5353, "protocol": "UDP"},
            {"port": 5353, "protocol": "TCP"},
        ]
    }


def test_cluster_role_binding(make_ctx: MakeContext) -> None:
    binding = one(make_ctx(), "ClusterRoleBinding")
    assert "namespace" not in binding["metadata"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "maas-api",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "maas-api-red-team", "namespace": INFRA}
    ]


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


def test_a_repeated_render_is_kept_but_each_call_gets_its_own_objects(
    make_ctx: MakeContext,
) -> None:
    first = render(make_ctx())
    first[0].obj["metadata"]["name"] = "changed by a caller"
    second = render(make_ctx())  # equal inputs, another instance: the kept render
    assert second[0].obj["metadata"]["name"] != "changed by a caller"
    assert [m.obj for m in second] == [m.obj for m in render(make_ctx(replicas=1))]
    assert [m.obj for m in render(make_ctx(replicas=3))] != [m.obj for m in second]


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"tenant": "a", "tenant_namespace": "ai-tenant-a", "replicas": 3},
        {"gateway_name": "shared-gw", "image": "registry.example/maas-api@sha256:" + "0" * 64},
        {"telemetry": Telemetry()},
        {"telemetry": Telemetry(organization=False, user=True, group=True, model_usage=False)},
        {"max_expiration_days": 7, "authorino_namespaces": ("kuadrant-system",)},
        {"backend_ca_pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
    ],
)
def test_filling_a_parsed_shape_gives_what_parsing_the_rendered_text_gives(
    make_ctx: MakeContext, overrides: dict[str, Any]
) -> None:
    own = {"tenant", "tenant_namespace", "gateway_name"}  # the default tenant's are fixed
    default = default_tenant(make_ctx, **{k: v for k, v in overrides.items() if k not in own})
    for ctx in (make_ctx(**overrides), default):
        variables = template_variables(ctx)
        for filename, _ in TEMPLATE_FILES:
            template = render_module._environment().get_template(filename)
            assert documents(template, variables) == parse_documents(template.render(variables)), (
                filename
            )


def test_a_value_pasted_into_longer_text_is_parsed_from_the_real_text() -> None:
    template = render_module._environment().from_string(
        "a: {{ x | to_json }}\nb: prefix-{{ x | to_json }}\n"
    )
    assert documents(template, {"x": "v"}) == [{"a": "v", "b": 'prefix-"v"'}]


def test_a_value_that_looks_like_a_marker_is_kept_as_it_is() -> None:
    template = render_module._environment().from_string("a: {{ x | to_json }}\n")
    marker = "@@aitenant-slot-0@@"
    assert documents(template, {"x": marker}) == [{"a": marker}]
