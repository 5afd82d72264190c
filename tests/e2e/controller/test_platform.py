"""The tenant platform on a real API server and node (docs/differences.md D5, D6, D9;
docs/contract.md §3.6, §5.4): each maas-api Deployment's availability is the deployment
controller's, from what the kubelet reports (tests/e2e/test_platform_runs.py looks at the pods
themselves).
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any, cast

import pytest
from cryptography import x509
from devtools import samples
from devtools.cluster import LocalCluster
from devtools.maas_api import FakeMaasApi
from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Namespace, Secret
from lightkube.types import PatchType

from aitenant import contract
from aitenant.controllers.tenant_config.reconciler import TenantConfigReconciler
from aitenant.platform import kinds
from aitenant.resources import AITenant, MaaSSubscription, MaasTenantConfig
from aitenant.runtime.control.controller import Key, RequeueAfter

from ..harness import (
    AITENANT_NS,
    CONTROLLER_USER,
    GATEWAY_NS,
    INFRA_NS,
    WRITE_VERBS,
    RunningController,
    e2e_settings,
    eventually,
)
from ..tenants import PHASE_TIMEOUT, Names, make_tenant, node_cordoned, ready, wait_phase

pytestmark = pytest.mark.e2e

CONFIG = "default-tenant"
# The smallest AuthPolicy rules Kuadrant's schema accepts (it needs at least one rule).
ALLOW_ALL: dict[str, Any] = {"authorization": {"allow": {"opa": {"rego": "allow = true"}}}}
# Where a tenant's platform objects live.
SCOPES: list[tuple[kinds.Kind, str | None]] = [
    (kinds.SERVICE_ACCOUNT, INFRA_NS),
    (kinds.SECRET, INFRA_NS),
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


async def test_platform_is_rendered_and_the_config_reports_ready(
    kube: AsyncClient, controller: RunningController, maas_api: FakeMaasApi, unique: Names
) -> None:
    name = unique("platform")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")

    assert await platform_of(kube, name) == expected_platform(name)
    for kind, namespace, obj_name in expected_platform(name):
        k = next(k for k, _ in SCOPES if k.kind == kind)
        obj = await get(kube, k, obj_name, namespace or None)
        meta = obj["metadata"]
        labels = meta["labels"]
        assert labels["app.kubernetes.io/part-of"] == "models-as-a-service"
        assert labels["app.kubernetes.io/managed-by"] == "aitenant-controller"
        assert labels["maas.opendatahub.io/tenant-name"] == name
        assert labels["maas.opendatahub.io/tenant-namespace"] == tns
        # cross-namespace: labels only (docs/differences.md D6)
        assert not meta.get("ownerReferences")

    cronjob = await get(kube, kinds.CRONJOB, f"maas-api-key-cleanup-{name}", INFRA_NS)
    assert cronjob["apiVersion"] == "batch/v1"
    assert cronjob["spec"]["schedule"] == "*/15 * * * *"

    # Written by field manager aitenant-controller through server-side apply.
    deployment = await get(kube, kinds.DEPLOYMENT, f"maas-api-{name}", INFRA_NS)
    managers = {m["manager"]: m["operation"] for m in deployment["metadata"]["managedFields"]}
    assert managers["aitenant-controller"] == "Apply"
    route = await get(kube, kinds.HTTP_ROUTE, f"maas-api-route-{name}", INFRA_NS)
    assert route["spec"]["parentRefs"][0]["name"] == name

    # The serving certificate (docs/differences.md D9): signed by the CA the controller was
    # given, right names.
    secret = await get(kube, kinds.SECRET, f"maas-api-{name}-serving-cert", INFRA_NS)
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    ca = x509.load_pem_x509_certificate(maas_api.ca_file.read_bytes())
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        f"maas-api-{name}.{INFRA_NS}.svc",
        f"maas-api-{name}.{INFRA_NS}.svc.cluster.local",
    ]
    # The Gateway originates TLS to that Service, checking that name against that CA.
    policy = await get(kube, kinds.BACKEND_TLS_POLICY, f"maas-api-{name}", INFRA_NS)
    assert policy["spec"]["targetRefs"] == [
        {"group": "", "kind": "Service", "name": f"maas-api-{name}"}
    ]
    validation = policy["spec"]["validation"]
    assert validation["hostname"] in san.get_values_for_type(x509.DNSName)
    assert validation["caCertificateRefs"] == [
        {"group": "", "kind": "ConfigMap", "name": f"maas-api-{name}-backend-ca"}
    ]
    bundle = await get(kube, kinds.CONFIG_MAP, f"maas-api-{name}-backend-ca", INFRA_NS)
    assert bundle["data"] == {"ca.crt": maas_api.ca_file.read_text()}

    config = await get_config(kube, name)
    assert contract.TENANT_CONFIG_FINALIZER in config["metadata"]["finalizers"]
    status = config["status"]
    assert status["phase"] == "Active"
    assert status["infraNamespace"] == INFRA_NS
    cond = ready(config)
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "Reconciled",
        "MaaS platform manifests applied and maas-api deployment is available",
    )
    assert cond["observedGeneration"] == config["metadata"]["generation"]


async def test_config_is_ready_only_once_maas_api_is_available(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("waiting")
    deployment = f"maas-api-{name}"
    async with node_cordoned(kube):  # the maas-api pod cannot be placed meanwhile
        await make_tenant(kube, name)

        config = await config_with_reason(kube, name, "MaaSAPINotAvailable")
        assert config["status"]["phase"] == "Pending"
        assert ready(config)["status"] == "False"
        waiting = f"waiting for Deployment {INFRA_NS}/{deployment} to become available"
        assert ready(config)["message"].startswith(waiting)

        async def says_unscheduled() -> bool:
            message = ready(await get_config(kube, name))["message"]
            return message.startswith(f"{waiting}: pod {deployment}-") and (
                "not scheduled (Unschedulable: " in message
            )

        await eventually(says_unscheduled, timeout=PHASE_TIMEOUT)
        await wait_phase(kube, name, "Pending", "TenantConfigNotReady")
        # A pass while the Deployment is unavailable keeps waiting (and looks again in 30 s).
        assert controller.app is not None
        key = Key(f"ai-tenant-{name}", CONFIG)
        assert await controller.app.config_controller.process(key) == RequeueAfter(30)
        assert (await get_config(kube, name))["status"]["phase"] == "Pending"
    loop = asyncio.get_running_loop()

    async def available() -> float | None:
        obj = await get(kube, kinds.DEPLOYMENT, deployment, INFRA_NS)
        return loop.time() if samples.is_available(obj) else None

    # The deployment controller reports it once the kubelet runs the pod and it is Ready.
    became_available = await eventually(available, timeout=PHASE_TIMEOUT, interval=0.05)
    await wait_phase(kube, name, "Active")
    # Noticed through the Deployment watch, not a periodic requeue (30 s).
    assert loop.time() - became_available < 5


async def test_user_edit_of_the_deployment_is_reverted(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("drift")
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    deployment = f"maas-api-{name}"
    await kube.patch(
        kinds.DEPLOYMENT.resource,
        deployment,
        {"spec": {"replicas": 4, "template": {"spec": {"serviceAccountName": "default"}}}},
        namespace=INFRA_NS,
        patch_type=PatchType.MERGE,
        field_manager="kubectl-edit",
    )

    async def reverted() -> bool:
        obj = await get(kube, kinds.DEPLOYMENT, deployment, INFRA_NS)
        spec = obj["spec"]
        return spec["replicas"] == 1 and spec["template"]["spec"]["serviceAccountName"] == (
            deployment
        )

    await eventually(reverted, timeout=10)


async def test_unmanaged_object_is_kept_as_edited(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("optout")
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    route = f"maas-api-route-{name}"
    await kube.patch(
        kinds.HTTP_ROUTE.resource,
        route,
        {
            "metadata": {"annotations": {"opendatahub.io/managed": "false"}},
            "spec": {"rules": [{"backendRefs": [{"name": "my-own-backend", "port": 8080}]}]},
        },
        namespace=INFRA_NS,
        patch_type=PatchType.MERGE,
        field_manager="kubectl-edit",
    )
    before = await get(kube, kinds.HTTP_ROUTE, route, INFRA_NS)
    await reconcile_config(controller, name)
    # A spec edit of the config also re-renders everything; the route is still left alone.
    await kube.patch(
        MaasTenantConfig,
        CONFIG,
        {"spec": {"apiKeys": {"maxExpirationDays": 7}}},
        namespace=f"ai-tenant-{name}",
        patch_type=PatchType.MERGE,
    )

    async def rolled() -> bool:
        obj = await get(kube, kinds.DEPLOYMENT, f"maas-api-{name}", INFRA_NS)
        env = obj["spec"]["template"]["spec"]["containers"][0]["env"]
        return {"name": "API_KEY_MAX_EXPIRATION_DAYS", "value": "7"} in env

    await eventually(rolled)
    after = await get(kube, kinds.HTTP_ROUTE, route, INFRA_NS)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # The user's edit, as the HTTPRoute schema defaults it (kind, group, weight, match).
    [rule] = after["spec"]["rules"]
    assert rule["backendRefs"] == [
        {"group": "", "kind": "Service", "name": "my-own-backend", "port": 8080, "weight": 1}
    ]


async def test_a_gateway_auth_policy_made_before_the_tenant_is_left_as_it_is(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    # Create-only: the platform's cache sees it although it has none of our labels, so the
    # tenant neither overwrites it nor asks the API server about it on every pass.
    name = unique("prior")
    policy = f"{name}-maas-auth"
    theirs = {
        "targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name},
        "rules": ALLOW_ALL,
    }
    await kube.create(
        kinds.AUTH_POLICY.resource(
            {
                "apiVersion": kinds.AUTH_POLICY.api_version,
                "kind": "AuthPolicy",
                "metadata": {"name": policy, "namespace": GATEWAY_NS},
                "spec": theirs,
            }
        )
    )
    before = await get(kube, kinds.AUTH_POLICY, policy, GATEWAY_NS)
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    await reconcile_config(controller, name)
    after = await get(kube, kinds.AUTH_POLICY, policy, GATEWAY_NS)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"] == before["spec"]
    assert after["spec"]["rules"]["authorization"]["allow"]["opa"]["rego"] == "allow = true"
    assert ("AuthPolicy", GATEWAY_NS, policy) not in await platform_of(kube, name)


async def test_telemetry_turned_off_prunes_the_telemetry_policy(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("telemetry")
    tns = f"ai-tenant-{name}"
    policy = f"maas-telemetry-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    assert await absent(kube, kinds.TELEMETRY_POLICY, policy, GATEWAY_NS)
    for enabled in (True, False):
        await kube.patch(
            MaasTenantConfig,
            CONFIG,
            {"spec": {"telemetry": {"enabled": enabled}}},
            namespace=tns,
            patch_type=PatchType.MERGE,
        )

        async def rendered(enabled: bool = enabled) -> bool:
            return await absent(kube, kinds.TELEMETRY_POLICY, policy, GATEWAY_NS) is not enabled

        await eventually(rendered)
    assert await platform_of(kube, name) == expected_platform(name)


async def test_telemetry_labels_follow_the_config(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("metrics")
    policy = f"maas-telemetry-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    await kube.patch(
        MaasTenantConfig,
        CONFIG,
        {"spec": {"telemetry": {"metrics": {"captureUser": True, "captureOrganization": False}}}},
        namespace=f"ai-tenant-{name}",
        patch_type=PatchType.MERGE,
    )

    async def labels() -> dict[str, str]:
        obj = await get(kube, kinds.TELEMETRY_POLICY, policy, GATEWAY_NS)
        return obj["spec"]["metrics"]["default"]["labels"]

    # A telemetry block without "enabled" is on; user on, organization off, model by default.
    assert await eventually(labels) == {
        "subscription": "auth.identity.selected_subscription",
        "cost_center": (
            "has(auth.identity.subscription_info.costCenter) ? "
            'auth.identity.subscription_info.costCenter : ""'
        ),
        "user": "auth.identity.userid",
        "model": 'responseBodyJSON("/model")',
    }
    obj = await get(kube, kinds.TELEMETRY_POLICY, policy, GATEWAY_NS)
    assert obj["spec"]["targetRef"]["name"] == name
    assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "maas-observability"


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


async def test_an_older_route_level_auth_policy_is_pruned_unless_unmanaged(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    pruned, kept = unique("oldauth"), unique("keptauth")
    for name in (pruned, kept):
        await make_tenant(kube, name)
    for name in (pruned, kept):
        await wait_phase(kube, name, "Active")
    resource = kinds.AUTH_POLICY.resource
    await kube.create(resource.from_dict(old_route_auth_policy(pruned)))
    await kube.create(resource.from_dict(old_route_auth_policy(kept, unmanaged=True)))

    # Its appearance re-queues the tenant's config (a tracked object), whose pass prunes it.
    async def gone() -> bool:
        return await absent(kube, kinds.AUTH_POLICY, f"maas-api-auth-policy-{pruned}", INFRA_NS)

    await eventually(gone)

    # The opted-out copy: once the controller's cache holds it, a whole pass leaves it alone.
    cache = reconciler_of(controller).cache

    async def cached() -> bool:
        obj = cache.get(kinds.AUTH_POLICY, INFRA_NS, f"maas-api-auth-policy-{kept}")
        return isinstance(obj, dict)

    await eventually(cached)
    await reconcile_config(controller, kept)
    obj = await get(kube, kinds.AUTH_POLICY, f"maas-api-auth-policy-{kept}", INFRA_NS)
    assert not obj["metadata"].get("deletionTimestamp")
    # The tenant itself renders no route-level AuthPolicy.
    assert await platform_of(kube, pruned) == expected_platform(pruned)
    assert await platform_of(kube, kept) == expected_platform(kept) | {
        ("AuthPolicy", INFRA_NS, f"maas-api-auth-policy-{kept}")
    }
    await kube.delete(resource, f"maas-api-auth-policy-{kept}", namespace=INFRA_NS)


async def test_network_policies_read_back(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("netpol")
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    api = await get(kube, kinds.NETWORK_POLICY, f"maas-api-{name}", INFRA_NS)
    deployment = await get(kube, kinds.DEPLOYMENT, f"maas-api-{name}", INFRA_NS)
    api_pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert api["spec"]["podSelector"]["matchLabels"].items() <= api_pod_labels.items()
    authorino = api["spec"]["ingress"][0]["from"][3]
    assert authorino == {
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "In",
                    "values": list(controller.settings.authorino_namespaces),
                }
            ]
        },
        "podSelector": {"matchLabels": {"authorino-resource": "authorino"}},
    }
    assert controller.settings.authorino_namespaces == (
        "kuadrant-system",
        "openshift-operators",
        "rh-connectivity-link",
    )

    cleanup = f"maas-key-cleanup-{name}"
    policy = await get(kube, kinds.NETWORK_POLICY, cleanup, INFRA_NS)
    cronjob = await get(kube, kinds.CRONJOB, f"maas-api-key-cleanup-{name}", INFRA_NS)
    job_pod_labels = cronjob["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {contract.LABEL_TENANT_INSTANCE: cleanup}}
    assert spec["podSelector"]["matchLabels"].items() <= job_pod_labels.items()
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert not spec.get("ingress")  # no ingress rule: nothing may reach a cleanup pod
    to_api, dns = spec["egress"]
    (peer,) = to_api["to"]
    assert set(peer) == {"podSelector"}  # the infra namespace only
    assert peer["podSelector"]["matchLabels"].items() <= api_pod_labels.items()
    assert peer["podSelector"]["matchLabels"][contract.LABEL_TENANT_INSTANCE] == f"maas-api-{name}"
    assert to_api["ports"] == [{"port": 8443, "protocol": "TCP"}]
    assert "to" not in dns
    assert {(p["port"], p["protocol"]) for p in dns["ports"]} == {
        (53, "UDP"),
        (53, "TCP"),
        (5353, "UDP"),
        (5353, "TCP"),
    }


async def test_reconciling_an_unchanged_tenant_writes_nothing(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("steady")
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")

    async def config_caught_up() -> bool:
        # The informer holds the config as last written (our last status write included).
        live = await get_config(kube, name)
        cached = configs.get(live["metadata"]["namespace"], live["metadata"]["name"]) or {}
        return (cached.get("metadata") or {}).get("resourceVersion") == live["metadata"][
            "resourceVersion"
        ]

    assert controller.app is not None
    configs = controller.app.configs
    await eventually(config_caught_up)
    # The platform cache may still be seeing our last applies: once it has, a pass writes
    # nothing (each try is one reconcile; the one measured is the first without a write).
    writes = gets = 0.0

    async def quiet_pass() -> bool:
        nonlocal writes, gets
        writes = controller.api_requests(WRITE_VERBS)
        gets = controller.api_requests(("GET",))
        await reconcile_config(controller, name)
        return controller.api_requests(WRITE_VERBS) == writes

    await eventually(quiet_pass, interval=0.2)
    reads = controller.api_requests(("GET",)) - gets
    print(f"unchanged tenant: 0 server-side applies, {reads:.0f} GETs per reconcile")
    assert reads <= 16


async def test_two_tenants_are_disjoint_and_deletion_removes_only_its_own(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    first, second = unique("left"), unique("right")
    for name in (first, second):
        await make_tenant(kube, name)
    for name in (first, second):
        await wait_phase(kube, name, "Active")
    mine, theirs = await platform_of(kube, first), await platform_of(kube, second)
    assert mine == expected_platform(first)
    assert theirs == expected_platform(second)
    assert not mine & theirs

    await kube.delete(AITenant, first, namespace=AITENANT_NS)

    async def cleaned() -> bool:
        return await platform_of(kube, first) == set()

    await eventually(cleaned, timeout=20)
    assert await platform_of(kube, second) == theirs
    # The tenant namespace is released, never deleted.
    ns = await kube.get(Namespace, f"ai-tenant-{first}")
    assert ns.metadata is not None
    assert ns.metadata.deletionTimestamp is None


async def test_missing_db_secret_is_reported(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """maas-api reads Secret maas-db-config (a name fixed in maas-api): without it the config
    says so and nothing is rendered; once it is there the tenant goes Active."""
    name = unique("nodb")
    await kube.delete(Secret, samples.DB_SECRET, namespace=INFRA_NS)
    try:
        await make_tenant(kube, name)

        config = await config_with_reason(kube, name, "DependencyMissing")
        assert ready(config)["message"] == (
            f"Secret {INFRA_NS}/maas-db-config not found: maas-api reads DB_CONNECTION_URL "
            "from it (--maas-api-db-secret)"
        )
        assert await platform_of(kube, name) == set()
    finally:
        await samples.ensure_db_secret(kube, INFRA_NS)
    await wait_phase(kube, name, "Active")


async def test_a_same_named_deployment_someone_else_made_is_reported_not_rewritten(
    cluster: LocalCluster, kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """A maas-api Deployment another controller made (its own selector, none of our labels) is
    invisible to our label-selected caches. The create that finds its name taken is the only
    write; it is read, reported as in the way with who made it and the fix, and later passes
    only read it (docs/differences.md D32); deleting it lets the platform be applied and the
    tenant go Active."""
    name = unique("theirs")
    deployment = f"maas-api-{name}"
    selector = {"app": f"theirs-{name}"}
    theirs = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": deployment, "namespace": INFRA_NS},
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {"containers": [{"name": "maas-api", "image": "maas-api:theirs"}]},
            },
        },
    }
    await kube.patch(
        kinds.DEPLOYMENT.resource,
        deployment,
        theirs,
        namespace=INFRA_NS,
        patch_type=PatchType.APPLY,
        field_manager="maas-controller",
    )
    await make_tenant(kube, name)

    message = ready(await config_with_reason(kube, name, "ApplyFailed"))["message"]
    assert message == (
        f"Deployment {INFRA_NS}/{deployment} is in the way: it exists, made by maas-controller, "
        f"without {contract.LABEL_TENANT_NAME}={name}, and is not taken over; rename or delete "
        "it and the platform is applied"
    )
    for _ in range(3):  # passes as the 30 s requeue (or any event) would bring
        await reconcile_config(controller, name)

    def writes_of_it() -> list[int]:
        """The answers to the controller's writes of it, in order."""
        return [
            event["responseStatus"]["code"]
            for line in cluster.audit_log.read_text().splitlines()
            if (event := json.loads(line))["user"]["username"] == CONTROLLER_USER.name
            and event["verb"] in ("patch", "update", "create")
            and event.get("objectRef", {}).get("name") == deployment
            and event["objectRef"].get("resource") == "deployments"
            and event.get("stage") == "ResponseComplete"
        ]

    assert writes_of_it() == [409], "one create that found the name taken, never a write over it"
    live = await get(kube, kinds.DEPLOYMENT, deployment, INFRA_NS)
    assert live["spec"]["selector"]["matchLabels"] == selector
    assert contract.LABEL_TENANT_NAME not in (live["metadata"].get("labels") or {})
    await kube.delete(kinds.DEPLOYMENT.resource, deployment, namespace=INFRA_NS)
    await reconcile_config(controller, name)  # its requeue, 30 s later
    await wait_phase(kube, name, "Active")
    live = await get(kube, kinds.DEPLOYMENT, deployment, INFRA_NS)
    assert live["metadata"]["labels"][contract.LABEL_TENANT_NAME] == name


AITENANT_KIND = kinds.Kind(contract.API_VERSION, "AITenant", "aitenants")
CONFIG_KIND = kinds.Kind(contract.API_VERSION, "MaasTenantConfig", "maastenantconfigs")


async def test_a_forced_deletion_leaves_nothing_of_the_platform_serving(
    cluster: LocalCluster,
    kube: AsyncClient,
    controller: RunningController,
    maas_api: FakeMaasApi,
    unique: Names,
) -> None:
    """A MaaSSubscription whose foreign finalizer never clears holds the config's cleanup; once
    the deletion timeout has removed the AITenant, its platform goes all the same, so its
    Gateway cannot route to the old maas-api (docs/contract.md §5.4)."""
    name = unique("forced-platform")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    before = await platform_of(kube, name)
    assert {"Deployment", "Service", "HTTPRoute", "TokenRateLimitPolicy"} <= {
        kind for kind, _, _ in before
    }
    stuck = samples.maas_subscription("stuck", tns, finalizers=["example.com/never"])
    await kube.create(MaaSSubscription.from_dict(stuck))
    await controller.stop()  # one with a 2 s deletion timeout instead
    impatient = RunningController(cluster, e2e_settings(maas_api, deletion_timeout=2.0))
    await impatient.start()
    loop = asyncio.get_running_loop()
    try:
        await kube.delete(AITenant, name, namespace=AITENANT_NS)

        async def tenant_gone() -> bool:
            return await absent(kube, AITENANT_KIND, name, AITENANT_NS)

        await eventually(tenant_gone, timeout=30)
        gone_at = loop.time()

        async def nothing_left() -> bool:
            return not await platform_of(kube, name)

        try:
            await eventually(nothing_left, timeout=20, interval=0.2)
        except AssertionError:
            left = sorted(await platform_of(kube, name))
            raise AssertionError(f"left after the AITenant was gone: {left}") from None
        print(f"\nplatform gone {loop.time() - gone_at:.2f} s after the forced AITenant")
        assert await absent(kube, CONFIG_KIND, CONFIG, tns)
    finally:
        await impatient.stop()
        await kube.patch(
            MaaSSubscription,
            "stuck",
            {"metadata": {"finalizers": None}},
            namespace=tns,
            patch_type=PatchType.MERGE,
        )
        await controller.start()
