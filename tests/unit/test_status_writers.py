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
PROC_STATUS = "/proc/"


def status_writes(source: str) -> list[str]:
    found = []
    for line in source.splitlines():
        if PROC_STATUS in line:  # a process's /proc/<pid>/status, read
            continue
        for match in STATUS_WRITE.finditer(line):
            if match.group(1) not in OURS:
                found.append(line.strip())
    return found


def test_status_writes_are_recognised() -> None:
    assert status_writes("await client.patch(Deployment.Status, name, patch)") != []
    assert status_writes('api.put("apps/v1/deployments/status")') != []
    assert status_writes("await kube.patch(AITenant.Status, name, patch)") == []
    assert status_writes('Path(f"/proc/{pid}/status").read_text()') == []


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
        if (found := status_writes(path.read_text()))
    }
    assert offenders == {}
