"""The fence we ship for the reference controller (deploy/maas-controller-fence.yaml), judged
by the real API server's authorizer: every write the reference made to what we own in a
side-by-side run is refused, and what its MaaS reconcilers need is allowed (README, "Beside
the reference controller")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import AsyncClient, codecs
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.resources.authorization_v1 import SubjectAccessReview

pytestmark = pytest.mark.e2e

FENCE = Path(__file__).parents[3] / "deploy" / "maas-controller-fence.yaml"
NAMESPACE, ACCOUNT = "opendatahub", "maas-controller"  # the subject the fence names
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"]
TENANT_NS = "ai-tenant-red"
INFRA_NS = "opendatahub"

# (verb, group, resource, subresource, namespace): writes the reference made to objects we own.
REFUSED = [
    ("patch", "maas.opendatahub.io", "aitenants", "status", "ai-tenants"),
    ("update", "maas.opendatahub.io", "aitenants", "", "ai-tenants"),  # its finalizer
    ("patch", "maas.opendatahub.io", "maastenantconfigs", "", TENANT_NS),
    ("update", "maas.opendatahub.io", "maastenantconfigs", "status", TENANT_NS),
    ("create", "maas.opendatahub.io", "configs", "", ""),
    ("patch", "maas.opendatahub.io", "tenants", "", TENANT_NS),
    ("create", "", "namespaces", "", ""),
    ("patch", "", "namespaces", "", ""),
    ("delete", "rbac.authorization.k8s.io", "roles", "", TENANT_NS),
    ("create", "rbac.authorization.k8s.io", "rolebindings", "", TENANT_NS),
    ("patch", "apps", "deployments", "", INFRA_NS),
    ("create", "", "serviceaccounts", "", INFRA_NS),
    ("create", "", "secrets", "", INFRA_NS),
    ("patch", "", "services", "", INFRA_NS),
    ("create", "batch", "jobs", "", INFRA_NS),
    ("patch", "batch", "cronjobs", "", INFRA_NS),
    ("delete", "networking.k8s.io", "networkpolicies", "", INFRA_NS),
    ("patch", "gateway.networking.k8s.io", "httproutes", "", INFRA_NS),
    ("patch", "extensions.kuadrant.io", "telemetrypolicies", "", "gateways"),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""),
    # The database Secret's Role and RoleBinding maas-api[-t]-db-secret (docs/differences.md D39).
    ("patch", "rbac.authorization.k8s.io", "roles", "", INFRA_NS),
    ("delete", "rbac.authorization.k8s.io", "rolebindings", "", INFRA_NS),
]
# What its MaaSAuthPolicy, MaaSSubscription and MaaSModelRef reconcilers do, and its reads.
ALLOWED = [
    ("create", "maas.opendatahub.io", "maasauthpolicies", "", TENANT_NS),
    ("patch", "maas.opendatahub.io", "maassubscriptions", "status", TENANT_NS),
    ("update", "maas.opendatahub.io", "maasmodelrefs", "finalizers", TENANT_NS),
    ("create", "kuadrant.io", "authpolicies", "", TENANT_NS),
    ("patch", "kuadrant.io", "tokenratelimitpolicies", "", "gateways"),
    ("create", "", "events", "", TENANT_NS),
    ("watch", "maas.opendatahub.io", "aitenants", "", ""),
    ("list", "maas.opendatahub.io", "maastenantconfigs", "", ""),
    ("get", "apps", "deployments", "", INFRA_NS),
]


@pytest.fixture(scope="module")
async def fenced(kube: AsyncClient) -> AsyncIterator[None]:
    objects = list(codecs.load_all_yaml(FENCE.read_text()))
    for obj in objects:
        await kube.apply(obj, field_manager="fence-test")
    yield
    for obj in objects:
        await kube.delete(type(obj), obj.metadata.name)  # type: ignore[union-attr]


async def allowed(
    kube: AsyncClient, verb: str, group: str, resource: str, sub: str, ns: str
) -> bool:
    review = SubjectAccessReview(
        spec=SubjectAccessReviewSpec(
            user=USER,
            groups=GROUPS,
            resourceAttributes=ResourceAttributes(
                verb=verb,
                group=group,
                resource=resource,
                subresource=sub or None,
                namespace=ns or None,
            ),
        )
    )
    answer: Any = await kube.create(review)
    return bool(answer.status.allowed)


async def test_the_fence_refuses_every_write_to_what_we_own(
    kube: AsyncClient, fenced: None
) -> None:
    wrongly = [attrs for attrs in REFUSED if await allowed(kube, *attrs)]
    assert wrongly == []


async def test_the_fence_allows_what_the_references_maas_reconcilers_need(
    kube: AsyncClient, fenced: None
) -> None:
    refused = [attrs for attrs in ALLOWED if not await allowed(kube, *attrs)]
    assert refused == []


def test_the_fence_names_the_references_default_service_account() -> None:
    binding = [
        d for d in yaml.safe_load_all(FENCE.read_text()) if d["kind"] == "ClusterRoleBinding"
    ]
    assert binding[0]["subjects"] == [
        {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}
    ]
