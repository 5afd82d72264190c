"""What the controller wrote, read from the API server's audit log.

The whole e2e suite runs the controller as ``system:serviceaccount:aitenant-system:
aitenant-controller`` bound only to the shipped ClusterRoles, so every passing test is also a
proof that the ClusterRole is sufficient. This module runs last (by name) and checks the audit
trail of everything the suite made the controller do.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from devtools.cluster import LocalCluster

from ..harness import CONTROLLER_USER

pytestmark = pytest.mark.e2e

WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}

# (group, resource) the controller may write, and why.
ALLOWED_WRITES = {
    ("maas.opendatahub.io", "aitenants"),  # finalizer, legacy spec migration, bootstrap create
    # default-tenant create/adopt/finalizer/delete; leftover finalizers on configs not served
    ("maas.opendatahub.io", "maastenantconfigs"),
    ("maas.opendatahub.io", "tenants"),  # legacy Tenant marking and verified removal
    ("maas.opendatahub.io", "configs"),  # Config/default anchor and bootstrap marker
    ("maas.opendatahub.io", "maassubscriptions"),  # tenant cleanup (config finalizer)
    ("maas.opendatahub.io", "maasauthpolicies"),  # tenant cleanup (config finalizer)
    ("", "namespaces"),  # tenant namespace create/adopt/release, infra labels
    ("", "configmaps"),  # gateway claims; the BackendTLSPolicy's CA (infra namespace)
    ("", "events"),
    ("", "secrets"),  # maas-api serving certificates
    ("", "serviceaccounts"),
    ("", "services"),
    ("apps", "deployments"),
    ("batch", "cronjobs"),
    ("networking.k8s.io", "networkpolicies"),
    ("rbac.authorization.k8s.io", "roles"),  # tenant Roles; maas-api's database Secret Role
    # maas-api's database Secret RoleBinding (docs/differences.md D39)
    ("rbac.authorization.k8s.io", "rolebindings"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"),
    ("gateway.networking.k8s.io", "httproutes"),
    ("gateway.networking.k8s.io", "backendtlspolicies"),
    ("kuadrant.io", "authpolicies"),
    ("kuadrant.io", "tokenratelimitpolicies"),
    ("extensions.kuadrant.io", "telemetrypolicies"),
    ("coordination.k8s.io", "leases"),
    # The webhook's questions (docs/differences.md D34): nothing is stored.
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
}


def controller_events(cluster: LocalCluster) -> list[dict[str, Any]]:
    events = []
    for line in cluster.audit_log.read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") == CONTROLLER_USER.name:
            events.append(event)
    return events


def is_rbac_probe(event: dict[str, Any]) -> bool:
    """A request test_rbac.py expects refused: on an object named rbac-probe, in kube-system,
    or applied as field manager rbac-probe (a write of the controller's own binding's name)."""
    ref = event.get("objectRef", {})
    return (
        ref.get("name") == "rbac-probe"
        or ref.get("namespace") == "kube-system"
        or "fieldManager=rbac-probe" in event.get("requestURI", "")
    )


def test_controller_never_writes_a_gateway_and_only_what_it_owns(cluster: LocalCluster) -> None:
    events = controller_events(cluster)
    assert events, "the audit log must show the controller's requests"
    writes = [e for e in events if e["verb"] in WRITE_VERBS]
    assert writes, "the suite must have made the controller write"
    seen: Counter[tuple[str, str]] = Counter()
    for event in writes:
        if is_rbac_probe(event):
            continue  # a write test_rbac.py expects refused: checked below
        ref = event.get("objectRef", {})
        key = (ref.get("apiGroup", ""), ref.get("resource", ""))
        seen[key] += 1
        assert key[1] != "gateways", f"the controller wrote a Gateway: {ref}"
        assert key in ALLOWED_WRITES, f"unexpected write {event['verb']} {ref}"
    # test_rbac.py's probes of rights the controller must not have are named rbac-probe (or
    # probe a namespace it has no rights in); each of them must have been refused.
    probes = [e for e in events if is_rbac_probe(e)]
    assert probes, "test_rbac.py must have probed the controller's rights"
    assert all(e.get("responseStatus", {}).get("code") == 403 for e in probes), probes
    forbidden = [
        e
        for e in events
        if e.get("responseStatus", {}).get("code") == 403
        and e.get("objectRef", {}).get("resource") not in ("leases",)
        and not is_rbac_probe(e)
    ]
    assert forbidden == [], "the ClusterRole lacks what the controller used: " + "; ".join(
        f"{e['verb']} {e.get('objectRef', {}).get('resource')}" for e in forbidden[:5]
    )
    print(f"controller writes by kind: {dict(seen)}")


def test_namespace_writes_stay_in_tenant_and_infra_namespaces(cluster: LocalCluster) -> None:
    for event in controller_events(cluster):
        ref = event.get("objectRef", {})
        if event["verb"] not in WRITE_VERBS or ref.get("resource") != "namespaces":
            continue
        # objectRef of a CREATE may lack the name; the request body has it, unless the server
        # could not read the body (a request cut by the fault proxy ends in a 500), and then
        # nothing was written.
        name = ref.get("name") or event.get("requestObject", {}).get("metadata", {}).get("name")
        if not name and event.get("responseStatus", {}).get("code", 0) >= 400:
            continue
        assert name, f"an audit event for a namespace write names no namespace: {event}"
        assert (
            name.startswith("ai-tenant-")
            or name in ("ai-tenants", "aitenant-system", "models-as-a-service")
            or name.startswith("custom-infra")
        ), f"the controller wrote namespace {name}"
