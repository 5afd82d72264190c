"""The tenant platform against edits and leftovers on a real API server and node
(docs/differences.md D5, D6, D9; docs/contract.md §3.6): a user's edit is reverted unless
the object is unmanaged, objects made before the tenant or by an older version are left or
pruned, the telemetry policy follows the config, the NetworkPolicies read back, and an
unchanged tenant is not written again.
"""

from __future__ import annotations

import pytest
from lightkube import AsyncClient
from lightkube.types import PatchType

from aitenant import contract
from aitenant.platform import kinds
from aitenant.resources import MaasTenantConfig

from ..harness import (
    GATEWAY_NS,
    INFRA_NS,
    WRITE_VERBS,
    RunningController,
    eventually,
)
from ..tenants import Names, make_tenant, wait_phase
from .tenant_platform import (
    ALLOW_ALL,
    CONFIG,
    absent,
    expected_platform,
    get,
    get_config,
    old_route_auth_policy,
    platform_of,
    reconcile_config,
    reconciler_of,
)

pytestmark = pytest.mark.e2e


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

    async def configure(metrics: dict[str, bool]) -> None:
        await kube.patch(
            MaasTenantConfig,
            CONFIG,
            {"spec": {"telemetry": {"metrics": metrics}}},
            namespace=f"ai-tenant-{name}",
            patch_type=PatchType.MERGE,
        )

    async def labels() -> dict[str, str]:
        obj = await get(kube, kinds.TELEMETRY_POLICY, policy, GATEWAY_NS)
        return obj["spec"]["metrics"]["default"]["labels"]

    # A telemetry block without "enabled" is on; organization and model by default.
    await configure({"captureUser": False})
    assert "organization_id" in await eventually(labels)
    # User on, organization off: the label the create set goes (our create's managedFields
    # entry became an Apply entry before the apply that no longer renders it).
    await configure({"captureUser": True, "captureOrganization": False})
    expected = {
        "subscription": "auth.identity.selected_subscription",
        "cost_center": (
            "has(auth.identity.subscription_info.costCenter) ? "
            'auth.identity.subscription_info.costCenter : ""'
        ),
        "user": "auth.identity.userid",
        "model": 'responseBodyJSON("/model")',
    }

    async def updated() -> bool:
        return await labels() == expected

    await eventually(updated)
    obj = await get(kube, kinds.TELEMETRY_POLICY, policy, GATEWAY_NS)
    assert obj["spec"]["targetRef"]["name"] == name
    assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "maas-observability"
    ours = [m for m in obj["metadata"]["managedFields"] if m["manager"] == "aitenant-controller"]
    assert [m["operation"] for m in ours] == ["Apply"]


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
