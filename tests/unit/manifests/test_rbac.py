"""The ClusterRoles we ship: explicit verbs and resources, never a wildcard."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

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
        if "gateways" in rule.get("resources", []):
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, "Gateways are only read"
