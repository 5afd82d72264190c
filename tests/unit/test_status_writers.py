"""No code of the suite, the demo or the benchmarks writes a status another component owns:
a Deployment's availability comes from the kubelet and the deployment controller on the node
(devtools/node.py). Tests may write our own kinds' status, standing in for another writer
the controller must correct."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The status subresource of a kind, as lightkube names it (``Deployment.Status``) or by path.
STATUS_WRITE = re.compile(r"\b(\w+)\.Status\b|\w+/status\b")
OURS = {"AITenant", "MaasTenantConfig"}
# Grants, not writes: devtools/gateway.py binds Traefik (a Gateway API implementation) to the
# status of the Gateway API kinds it reports on, and of no other kind.
GRANTS = {
    "devtools/gateway.py": {
        "gatewayclasses/status",
        "gateways/status",
        "httproutes/status",
        "grpcroutes/status",
        "backendtlspolicies/status",
    }
}
PROC_STATUS = "/proc/"


def status_writes(source: str, granted: frozenset[str] = frozenset()) -> list[str]:
    found = []
    for line in source.splitlines():
        if PROC_STATUS in line:  # a process's /proc/<pid>/status, read
            continue
        for match in STATUS_WRITE.finditer(line):
            if match.group(1) not in OURS and match.group(0) not in granted:
                found.append(line.strip())
    return found


def test_status_writes_are_recognised() -> None:
    assert status_writes("await client.patch(Deployment.Status, name, patch)") != []
    assert status_writes('api.put("apps/v1/deployments/status")') != []
    assert status_writes("await kube.patch(AITenant.Status, name, patch)") == []
    assert status_writes('Path(f"/proc/{pid}/status").read_text()') == []
    grant = '    "gateways/status",'
    assert status_writes(grant) != []
    assert status_writes(grant, frozenset({"gateways/status"})) == []
    assert status_writes('"deployments/status",', frozenset({"gateways/status"})) != []


def test_no_status_of_another_component_is_written_outside_unit_tests() -> None:
    sources = [
        path
        for folder in ("devtools", "tests/e2e", "benchmarks")
        for path in (REPO / folder).rglob("*.py")
    ]
    assert sources
    offenders = {
        str(path.relative_to(REPO)): found
        for path in sources
        if (
            found := status_writes(
                path.read_text(), frozenset(GRANTS.get(str(path.relative_to(REPO)), ()))
            )
        )
    }
    assert offenders == {}


def test_the_gateway_is_granted_the_status_of_gateway_api_kinds_only() -> None:
    from devtools import gateway

    assert set(gateway.STATUS_GATEWAY_API) == GRANTS["devtools/gateway.py"]
    rules = [r for m in gateway.rbac_manifests() if m["kind"] == "ClusterRole" for r in m["rules"]]
    status = [r for r in rules if any(res.endswith("/status") for res in r["resources"])]
    assert status == [
        {
            "apiGroups": ["gateway.networking.k8s.io"],
            "resources": list(gateway.STATUS_GATEWAY_API),
            "verbs": ["update"],
        }
    ]
    assert all(set(r["verbs"]) <= {"get", "list", "watch"} for r in rules if r not in status)
