"""The ClusterRoles we ship: explicit verbs and resources, never a wildcard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from aitenant import manifests

RBAC = Path(__file__).resolve().parents[3] / "src" / "aitenant" / "manifests" / "rbac"


@pytest.mark.parametrize("path", sorted(RBAC.glob("*.yaml")), ids=lambda p: p.name)
def test_no_wildcards(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc or doc.get("kind") not in ("ClusterRole", "Role"):
            continue
        for rule in doc.get("rules") or []:
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in (rule.get(key) or []), f"{path.name}: wildcard in {key}: {rule}"
            assert rule.get("verbs"), f"{path.name}: rule without verbs: {rule}"


def test_controller_role_never_escalates_beyond_its_needs() -> None:
    doc = yaml.safe_load((RBAC / "clusterrole.yaml").read_text())
    verbs = {v for rule in doc["rules"] for v in rule["verbs"]}
    assert not verbs & {"escalate", "impersonate"}
    for rule in doc["rules"]:
        if "bind" in rule["verbs"]:
            assert rule.get("resourceNames"), "bind must be limited to named roles"


def _rules_for(doc: dict[str, Any], group: str, resource: str) -> list[dict[str, Any]]:
    return [
        rule
        for rule in doc["rules"]
        if group in rule["apiGroups"] and resource in rule["resources"]
    ]


def test_cluster_role_keeps_no_namespaced_platform_rights() -> None:
    doc = yaml.safe_load((RBAC / "clusterrole.yaml").read_text())
    # Leases and Secrets are granted only in their namespaces (namespaced.yaml.j2).
    for group, resource in [
        ("coordination.k8s.io", "leases"),
        ("", "secrets"),
        ("", "serviceaccounts"),
        ("", "services"),
        ("apps", "deployments"),
        ("networking.k8s.io", "networkpolicies"),
        ("batch", "cronjobs"),
        ("gateway.networking.k8s.io", "httproutes"),
        ("gateway.networking.k8s.io", "backendtlspolicies"),
        # The Gateways and Kuadrant policies live in the gateway namespace (its Role).
        ("gateway.networking.k8s.io", "gateways"),
        ("kuadrant.io", "authpolicies"),
        ("kuadrant.io", "tokenratelimitpolicies"),
        ("extensions.kuadrant.io", "telemetrypolicies"),
    ]:
        assert _rules_for(doc, group, resource) == [], f"{resource} in the ClusterRole"
    # ConfigMaps: the claims in the AITenant namespace, the BackendTLSPolicy's CA in the infra
    # namespace, both from Roles there; none anywhere else.
    assert _rules_for(doc, "", "configmaps") == []


def test_config_writes_are_limited_to_default_except_create() -> None:
    doc = yaml.safe_load((RBAC / "clusterrole.yaml").read_text())
    rules = _rules_for(doc, "maas.opendatahub.io", "configs")
    by_verb = {verb: rule.get("resourceNames") for rule in rules for verb in rule["verbs"]}
    assert by_verb == {
        "list": None,  # the informer; RBAC checks names on lists only with a field selector
        "watch": None,
        "get": ["default"],
        "patch": ["default"],
        "create": None,  # cannot be limited by name: the webhook and CEL rule do that
    }


def rendered(
    infra: str = "maas-infra", aitenants: str = "ai-tenants", gateways: str | None = None
) -> list[dict[str, Any]]:
    return manifests.render_namespaced_rbac(
        prefix="maas-aitenant-k8s",
        controller_namespace="maas",
        infra_namespace=infra,
        aitenant_namespace=aitenants,
        gateway_namespace=gateways,
        service_account="aitenant-k8s",
        service_account_namespace="maas",
        labels={"app.kubernetes.io/managed-by": "aitenant-k8s"},
    )


def test_namespaced_roles_lease_in_controller_namespace_platform_in_infra() -> None:
    docs = rendered()
    assert [(d["kind"], d["metadata"]["namespace"], d["metadata"]["name"]) for d in docs] == [
        ("Role", "maas", "maas-aitenant-k8s-leader-election"),
        ("RoleBinding", "maas", "maas-aitenant-k8s-leader-election"),
        ("Role", "maas-infra", "maas-aitenant-k8s-platform"),
        ("RoleBinding", "maas-infra", "maas-aitenant-k8s-platform"),
        ("Role", "ai-tenants", "maas-aitenant-k8s-claims"),
        ("RoleBinding", "ai-tenants", "maas-aitenant-k8s-claims"),
    ]
    lease, lease_binding, platform, platform_binding, claims, claims_binding = docs
    assert lease["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["aitenant-controller"],
            "verbs": ["get", "update"],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]
    assert _rules_for(platform, "", "secrets")[0]["verbs"] == [
        "get",
        "list",
        "watch",
        "create",
        "patch",
        "delete",
    ]
    # maas-api's pods: listed, nothing more, to say why it is not available
    # (docs/contract.md §3.6).
    assert [r["verbs"] for r in _rules_for(platform, "", "pods")] == [["list"]]
    # The BackendTLSPolicy and its CA ConfigMap, like every platform object.
    for group, resource in [
        ("gateway.networking.k8s.io", "backendtlspolicies"),
        ("", "configmaps"),
    ]:
        assert [r["verbs"] for r in _rules_for(platform, group, resource)] == [
            ["get", "list", "watch", "create", "patch", "delete"]
        ], resource
    # The gateway claims: written by create and replace, never applied (no patch).
    assert claims["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "list", "watch", "create", "update", "delete"],
        }
    ]
    pairs = ((lease_binding, lease), (platform_binding, platform), (claims_binding, claims))
    for binding, role in pairs:
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": role["metadata"]["name"],
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "aitenant-k8s", "namespace": "maas"}
        ]
    for doc in docs:
        assert doc["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "aitenant-k8s"}
        for rule in doc.get("rules") or []:
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in (rule.get(key) or [])


def test_infra_and_aitenant_namespaces_may_be_the_controller_namespace() -> None:
    docs = rendered(infra="maas", aitenants="maas")
    assert {d["metadata"]["namespace"] for d in docs} == {"maas"}
    assert len({(d["kind"], d["metadata"]["name"]) for d in docs}) == 6


def test_namespaced_rbac_needs_every_namespace() -> None:
    with pytest.raises(ValueError, match="infra_namespace is required"):
        rendered(infra="")
    with pytest.raises(ValueError, match="aitenant_namespace is required"):
        rendered(aitenants="")


def test_crds_carry_the_cel_rules() -> None:
    shipped = {d["metadata"]["name"]: d for d in manifests.crd_documents()}
    rules = shipped["maastenantconfigs.maas.opendatahub.io"]["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"
    ]["x-kubernetes-validations"]
    assert rules == [
        {
            "rule": "self.metadata.name == 'default-tenant'",
            "message": "MaasTenantConfig name must be default-tenant",
        }
    ]


def test_kuadrant_policies_in_the_gateway_namespace_once_it_is_known() -> None:
    docs = rendered(gateways="istio-gw")
    where = [(d["kind"], d["metadata"]["namespace"], d["metadata"]["name"]) for d in docs]
    assert where[-2:] == [
        ("Role", "istio-gw", "maas-aitenant-k8s-gateway"),
        ("RoleBinding", "istio-gw", "maas-aitenant-k8s-gateway"),
    ]
    gateway = docs[-2]
    verbs = {
        (rule["apiGroups"][0], resource): rule["verbs"]
        for rule in gateway["rules"]
        for resource in rule["resources"]
    }
    assert verbs == {
        # Read only, and `use` for the webhook's question (docs/differences.md D34).
        ("gateway.networking.k8s.io", "gateways"): ["get", "list", "watch", "use"],
        # Create-only: never patched.
        ("kuadrant.io", "authpolicies"): ["get", "list", "watch", "create", "delete"],
        ("kuadrant.io", "tokenratelimitpolicies"): [
            *("get", "list", "watch", "create", "patch", "delete")
        ],
        ("extensions.kuadrant.io", "telemetrypolicies"): [
            *("get", "list", "watch", "create", "patch", "delete")
        ],
    }
    # The infra namespace: only what pruning an older version's route AuthPolicy needs.
    platform = next(d for d in docs if d["metadata"]["name"].endswith("-platform"))
    assert [r["verbs"] for r in _rules_for(platform, "kuadrant.io", "authpolicies")] == [
        ["list", "watch", "delete"]
    ]
    # Without a gateway namespace there is no such Role.
    assert not [d for d in rendered() if d["metadata"]["name"].endswith("-gateway")]


def test_binding_policy_matches_the_controller_and_names_its_rule() -> None:
    policy, binding = manifests.render_binding_policy(
        name="maas-aitenant-k8s",
        service_account="aitenant-k8s",
        service_account_namespace="maas",
        own_binding="aitenant.maas.aitenant-k8s",
    )
    assert (policy["kind"], binding["kind"]) == (
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    )
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": ["rbac.authorization.k8s.io"],
            "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": ["clusterrolebindings"],
        }
    ]
    [condition] = spec["matchConditions"]
    assert condition["expression"] == (
        'request.userInfo.username == "system:serviceaccount:maas:aitenant-k8s"'
    )
    # DELETE has no object: the rule reads the binding as it was.
    binding_var, own = spec["variables"]
    assert binding_var == {
        "name": "binding",
        "expression": "request.operation == 'DELETE' ? oldObject : object",
    }
    # The deployment's own binding (the charm's hooks run as the same account), exactly.
    assert own["name"] == "own"
    for clause in (
        'variables.binding.metadata.name == "aitenant.maas.aitenant-k8s"',
        'variables.binding.roleRef.name == "aitenant-controller"',
        "size(variables.binding.subjects) == 1",
        'variables.binding.subjects[0].name == "aitenant-k8s"',
        'variables.binding.subjects[0].namespace == "maas"',
    ):
        assert clause in own["expression"], clause
    [rule] = spec["validations"]
    assert rule["expression"].startswith("variables.own || (")
    assert 'variables.binding.roleRef.name == "maas-api"' in rule["expression"]
    assert (
        'variables.binding.metadata.labels["app.kubernetes.io/managed-by"] == "aitenant-controller"'
        in rule["expression"]
    )
    assert rule["reason"] == "Forbidden"
    assert rule["message"].startswith("maas-aitenant-k8s: ")
    assert binding["spec"] == {"policyName": "maas-aitenant-k8s", "validationActions": ["Deny"]}


def test_cluster_role_has_no_verb_the_code_does_not_use() -> None:
    doc = yaml.safe_load((RBAC / "clusterrole.yaml").read_text())
    # Status subresources are replaced, never read or patched there; AITenants never replaced.
    for resource in ("aitenants/status", "maastenantconfigs/status"):
        assert [r["verbs"] for r in _rules_for(doc, "maas.opendatahub.io", resource)] == [
            ["update"]
        ]
    [aitenants] = _rules_for(doc, "maas.opendatahub.io", "aitenants")
    assert "update" not in aitenants["verbs"]
    # Events: core/v1 create only.
    assert [r["verbs"] for r in _rules_for(doc, "", "events")] == [["create"]]
    assert _rules_for(doc, "events.k8s.io", "events") == []


def test_maas_api_may_read_the_cluster_tls_profile() -> None:
    """maas-api reads and watches apiservers.config.openshift.io at start (docs/platform.md
    §2): without the right it retries for seconds at every start and logs a failing watch."""
    doc = yaml.safe_load((RBAC / "maas-api-clusterrole.yaml").read_text())
    assert [r["verbs"] for r in _rules_for(doc, "config.openshift.io", "apiservers")] == [
        ["get", "list", "watch"]
    ]


def test_infra_role_writes_the_db_secret_roles_and_holds_what_they_grant() -> None:
    """The controller writes each tenant's Role and RoleBinding for the database Secret in the
    infra namespace (docs/differences.md D39), and may only because it holds get on that Secret
    there itself: RBAC's escalation check, with neither `escalate` nor `bind`."""
    platform = next(d for d in rendered() if d["metadata"]["name"].endswith("-platform"))
    for resource in ("roles", "rolebindings"):
        assert [
            r["verbs"] for r in _rules_for(platform, "rbac.authorization.k8s.io", resource)
        ] == [["get", "list", "watch", "create", "patch", "delete"]], resource
    assert "get" in _rules_for(platform, "", "secrets")[0]["verbs"]
    assert not {v for r in platform["rules"] for v in r["verbs"]} & {"escalate", "bind"}
