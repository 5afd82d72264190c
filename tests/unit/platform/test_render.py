"""Rendering of the tenant platform (docs/differences.md D5, D6; docs/platform.md): names,
labels, the Deployment, Service, route, CronJob and ClusterRoleBinding, name limits and the
templating itself. Pure: no cluster. NetworkPolicies: test_render_network_policies.py;
traffic policies: test_render_gateway_policies.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import pytest

from aitenant.platform import render as render_module
from aitenant.platform.render import (
    TEMPLATE_FILES,
    Telemetry,
    documents,
    names_for,
    parse_documents,
    render,
    template_variables,
)

from .conftest import GATEWAY_NS, INFRA, MakeContext, default_tenant
from .rendered import (
    env_of,
    one,
)


def test_non_default_tenant_names_and_namespaces(make_ctx: MakeContext) -> None:
    rendered = {(m.kind.kind, m.namespace, m.name) for m in render(make_ctx())}
    assert rendered == {
        ("ServiceAccount", INFRA, "maas-api-red-team"),
        ("Role", INFRA, "maas-api-red-team-db-secret"),
        ("RoleBinding", INFRA, "maas-api-red-team-db-secret"),
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
        ("Role", INFRA, "maas-api-db-secret"),
        ("RoleBinding", INFRA, "maas-api-db-secret"),
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
