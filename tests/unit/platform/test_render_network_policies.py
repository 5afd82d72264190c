"""Rendering of the tenant platform's NetworkPolicies (docs/platform.md): who may reach
maas-api, and where the key-cleanup pods may go. Pure: no cluster.
"""

from __future__ import annotations

import pytest

from .conftest import GATEWAY_NS, MakeContext, default_tenant
from .rendered import (
    objects,
    one,
)


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
