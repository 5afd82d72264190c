"""The database Secret read through a Role in the infra namespace (docs/platform.md §2,
docs/differences.md D39): per tenant, get on that one Secret, there only, for its maas-api."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml

from aitenant import contract
from aitenant.platform import kinds
from aitenant.platform.apply import Applier
from aitenant.platform.render import Manifest, render

from .conftest import GATEWAY_NS, INFRA, MakeContext, default_tenant

RBAC = Path(__file__).resolve().parents[3] / "src" / "aitenant" / "manifests" / "rbac"


def rbac_of(manifests: list[Manifest]) -> dict[str, dict[str, Any]]:
    return {m.kind.kind: m.obj for m in manifests if m.kind in (kinds.ROLE, kinds.ROLE_BINDING)}


def test_role_grants_get_on_the_database_secret_alone(make_ctx: MakeContext) -> None:
    role = rbac_of(render(make_ctx()))["Role"]
    assert role["metadata"]["name"] == "maas-api-red-team-db-secret"
    assert role["metadata"]["namespace"] == INFRA
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [contract.MAAS_API_DB_SECRET],
            "verbs": ["get"],
        }
    ]


def test_binding_names_the_role_and_the_tenants_service_account_only(
    make_ctx: MakeContext,
) -> None:
    binding = rbac_of(render(make_ctx()))["RoleBinding"]
    assert binding["metadata"]["namespace"] == INFRA
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "maas-api-red-team-db-secret",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "maas-api-red-team", "namespace": INFRA}
    ]


def test_default_tenant_and_another_infra_namespace(make_ctx: MakeContext) -> None:
    found = rbac_of(render(default_tenant(make_ctx, infra_namespace="elsewhere")))
    assert {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in found.values()} == {
        ("elsewhere", "maas-api-db-secret")
    }
    assert found["RoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "maas-api", "namespace": "elsewhere"}
    ]


def test_both_carry_the_tracking_labels_so_pruning_and_cleanup_find_them(
    make_ctx: MakeContext,
) -> None:
    for obj in rbac_of(render(make_ctx())).values():
        labels = obj["metadata"]["labels"]
        assert labels[contract.LABEL_TENANT_NAME] == "red-team"
        assert labels[contract.LABEL_TENANT_NAMESPACE] == "ai-tenant-red-team"
        assert labels[contract.LABEL_MANAGED_BY] == contract.PLATFORM_MANAGED_BY_VALUE


def test_both_kinds_are_tracked_in_the_infra_namespace() -> None:
    scopes = kinds.platform_scopes(INFRA, GATEWAY_NS)
    assert (kinds.ROLE, INFRA) in scopes
    assert (kinds.ROLE_BINDING, INFRA) in scopes
    assert kinds.ROLE.built_in
    assert kinds.ROLE_BINDING.built_in


def test_the_shared_cluster_role_grants_no_secret() -> None:
    doc = yaml.safe_load((RBAC / "maas-api-clusterrole.yaml").read_text())
    assert [rule for rule in doc["rules"] if "secrets" in rule["resources"]] == []


async def test_the_role_is_written_before_its_binding(make_ctx: MakeContext) -> None:
    """The API server refuses a RoleBinding to a Role that does not exist yet (unless its writer
    holds `bind`): the Role is in the first wave, its binding in the second."""
    order: list[str] = []

    class Recording:
        async def create(self, obj: Any, **_: Any) -> dict[str, Any]:
            order.append(obj["kind"])
            await asyncio.sleep(0.001)
            return {"metadata": {"name": obj["metadata"]["name"]}}

    manifests = [m for m in render(make_ctx()) if not m.create_only]
    await Applier(Recording()).apply_all(manifests, lambda _: None)  # type: ignore[arg-type]
    assert order.index("Role") < order.index("RoleBinding")
    first_wave = {"Secret", "ServiceAccount", "Role"}
    assert set(order[: len([m for m in manifests if m.kind.kind in first_wave])]) == first_wave
