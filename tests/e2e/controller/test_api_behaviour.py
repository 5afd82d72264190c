"""What today's API server does with what we ship and write: OpenAPI v3 for our CRDs, and
field ownership through managedFields (server-side apply on the platform, merge patches on the
tenant namespace). The batch/v1 CronJob is in test_platform.py."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest
from devtools.cluster import LocalCluster, kube_bin_dir
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from aitenant import contract
from aitenant.platform import kinds
from aitenant.resources import AITenant, MaasTenantConfig

from ..harness import AITENANT_NS, INFRA_NS, RunningController, eventually
from ..tenants import Names, make_tenant, wait_phase

pytestmark = pytest.mark.e2e

OTHER_MANAGER = "someone-else"


def kubectl(cluster: LocalCluster, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    done = subprocess.run(
        [str(kube_bin_dir() / "kubectl"), *args], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_kubectl_explain_reads_our_schema_from_openapi_v3(
    cluster: LocalCluster, kube: AsyncClient
) -> None:
    # kubectl explain asks /openapi/v3 first; the descriptions are the shipped CRD's.
    out = kubectl(cluster, "explain", "aitenant.spec", "--api-version", contract.API_VERSION)
    assert "GROUP:      maas.opendatahub.io" in out
    assert "Desired state of the tenant." in out
    for field in ("gateway", "oidc", "rbac"):
        assert f"\n  {field}\t" in out, out
    nested = kubectl(cluster, "explain", "maastenantconfig.spec.apiKeys.maxExpirationDays")
    assert "FIELD: maxExpirationDays <integer>" in nested


def fields_of(obj: dict[str, Any], manager: str) -> list[dict[str, Any]]:
    """The fieldsV1 sets ``manager`` owns on ``obj``."""
    return [
        entry["fieldsV1"]
        for entry in obj["metadata"].get("managedFields") or []
        if entry["manager"] == manager
    ]


async def test_a_field_another_manager_set_survives_our_next_apply(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("ssa")
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    deployment = kinds.DEPLOYMENT.resource
    restarted = "kubectl.kubernetes.io/restartedAt"
    # What `kubectl rollout restart` writes, under another field manager.
    await kube.patch(
        deployment,
        f"maas-api-{name}",
        {"spec": {"template": {"metadata": {"annotations": {restarted: "2026-12-02T00:00:00Z"}}}}},
        namespace=INFRA_NS,
        patch_type=PatchType.MERGE,
        field_manager=OTHER_MANAGER,
    )
    # Our next pass that writes the Deployment: the tenant admin asks for two replicas.
    await kube.patch(
        MaasTenantConfig,
        contract.TENANT_CONFIG_NAME,
        {"metadata": {"annotations": {contract.ANNOTATION_MAAS_API_REPLICAS: "2"}}},
        namespace=f"ai-tenant-{name}",
        patch_type=PatchType.MERGE,
    )

    async def scaled() -> dict[str, Any] | None:
        obj = dict(await kube.get(deployment, f"maas-api-{name}", namespace=INFRA_NS))
        return obj if obj["spec"]["replicas"] == 2 else None

    obj = await eventually(scaled)
    annotations = obj["spec"]["template"]["metadata"].get("annotations") or {}
    assert annotations.get(restarted) == "2026-12-02T00:00:00Z"
    ours = json.dumps(fields_of(obj, contract.CONTROLLER_NAME))
    theirs = json.dumps(fields_of(obj, OTHER_MANAGER))
    assert f"f:{restarted}" in theirs
    assert f"f:{restarted}" not in ours
    assert '"f:replicas"' in ours


async def test_the_tenant_namespace_keeps_labels_we_do_not_own(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("nsfields")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    await kube.patch(
        Namespace,
        tns,
        {"metadata": {"labels": {"team": "blue", contract.LABEL_GATEWAY_TENANT: "someone"}}},
        patch_type=PatchType.MERGE,
        field_manager=OTHER_MANAGER,
    )
    # A spec change brings our next pass over the namespace.
    await kube.patch(
        AITenant,
        name,
        {"spec": {"oidc": {"issuerUrl": "https://idp.example.com/r", "clientId": "c"}}},
        namespace=AITENANT_NS,
        patch_type=PatchType.MERGE,
    )

    async def restored() -> dict[str, Any] | None:
        obj = (await kube.get(Namespace, tns)).to_dict()
        labels = obj["metadata"]["labels"]
        return obj if labels.get(contract.LABEL_GATEWAY_TENANT) == name else None

    obj = await eventually(restored)
    assert obj["metadata"]["labels"]["team"] == "blue"
    ours = json.dumps(fields_of(obj, contract.CONTROLLER_NAME))
    assert f'"f:{contract.LABEL_GATEWAY_TENANT}"' in ours
    assert '"f:team"' not in ours
