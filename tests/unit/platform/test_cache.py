"""The platform cache answers from its informers, or says it does not know."""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient, KubeConfig

from aitenant.platform import kinds
from aitenant.platform.apply import UNKNOWN
from aitenant.platform.cache import PlatformCache

from .conftest import GATEWAY_NS, INFRA


def cache() -> PlatformCache:
    """Never started: these tests fill the informers' stores themselves, nothing is sent."""
    client = AsyncClient(KubeConfig.from_dict(KUBECONFIG), field_manager="unit-tests")
    return PlatformCache(client, infra_namespace=INFRA, gateway_namespace=GATEWAY_NS)


KUBECONFIG: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x",
}


def labelled(name: str, tenant: str, namespace: str | None = INFRA) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "resourceVersion": "1",
        "labels": {
            "maas.opendatahub.io/tenant-name": tenant,
            "maas.opendatahub.io/tenant-namespace": f"ai-tenant-{tenant}",
        },
    }
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta}


def fill(platform: PlatformCache, objects: dict[tuple[kinds.Kind, str | None], list[Any]]) -> None:
    """Load informer stores as a completed LIST would, and mark every informer synced."""
    for informer in platform.informers:
        informer._replace_all([])  # pyright: ignore[reportPrivateUsage]
        informer.synced.set()
    for (kind, namespace), objs in objects.items():
        informer = platform._informers[(kind, namespace)]  # pyright: ignore[reportPrivateUsage]
        informer._replace_all(objs)  # pyright: ignore[reportPrivateUsage]


def test_unknown_until_synced() -> None:
    platform = cache()
    assert platform.get(kinds.DEPLOYMENT, INFRA, "maas-api-red") is UNKNOWN
    assert platform.get(kinds.CRONJOB, INFRA, "maas-api-key-cleanup-red") is UNKNOWN
    assert platform.tracked("ai-tenant-red", "red") is None


def test_answers_from_the_stores_once_synced() -> None:
    platform = cache()
    fill(
        platform,
        {
            (kinds.DEPLOYMENT, INFRA): [labelled("maas-api-red", "red")],
            (kinds.CLUSTER_ROLE_BINDING, None): [labelled("maas-api-red", "red", None)],
            (kinds.AUTH_POLICY, GATEWAY_NS): [labelled("red-maas-auth", "red", GATEWAY_NS)],
            (kinds.AUTH_POLICY, INFRA): [labelled("maas-api-auth-policy-blue", "blue")],
        },
    )
    found = platform.get(kinds.DEPLOYMENT, INFRA, "maas-api-red")
    assert found["apiVersion"] == "apps/v1"
    assert found["kind"] == "Deployment"
    assert platform.get(kinds.DEPLOYMENT, INFRA, "maas-api-blue") is None
    assert platform.get(kinds.CLUSTER_ROLE_BINDING, None, "maas-api-red") is not None
    tracked = platform.tracked("ai-tenant-red", "red")
    assert tracked is not None
    assert sorted((k.kind, o["metadata"]["name"]) for k, o in tracked) == [
        ("AuthPolicy", "red-maas-auth"),
        ("ClusterRoleBinding", "maas-api-red"),
        ("Deployment", "maas-api-red"),
    ]


def test_only_the_gateway_namespace_auth_policies_answer_for_unlabelled_objects() -> None:
    platform = cache()
    unlabelled = {"metadata": {"name": "maas-gateway-auth", "namespace": GATEWAY_NS}}
    fill(platform, {(kinds.AUTH_POLICY, GATEWAY_NS): [unlabelled]})
    gateway_informer = platform._informers[(kinds.AUTH_POLICY, GATEWAY_NS)]  # pyright: ignore[reportPrivateUsage]
    infra_informer = platform._informers[(kinds.AUTH_POLICY, INFRA)]  # pyright: ignore[reportPrivateUsage]
    assert gateway_informer.labels is None  # every AuthPolicy there, ours or not
    assert infra_informer.labels == {"app.kubernetes.io/managed-by": "aitenant-controller"}
    assert platform.get(kinds.AUTH_POLICY, GATEWAY_NS, "maas-gateway-auth", unlabelled=True)
    assert platform.get(kinds.AUTH_POLICY, GATEWAY_NS, "red-maas-auth", unlabelled=True) is None
    # Elsewhere the cache sees only our labelled objects: it cannot say one is missing.
    assert platform.get(kinds.AUTH_POLICY, INFRA, "red-maas-auth", unlabelled=True) is UNKNOWN
    assert platform.get(kinds.AUTH_POLICY, INFRA, "red-maas-auth") is None
    # An unlabelled object belongs to no tenant.
    assert platform.tracked("ai-tenant-red", "red") == []


def test_an_optional_kind_never_served_does_not_hold_up_the_tracked_objects() -> None:
    platform = cache()
    fill(platform, {(kinds.CONFIG_MAP, INFRA): [labelled("maas-api-red-backend-ca", "red")]})
    for (kind, _), informer in platform._informers.items():  # pyright: ignore[reportPrivateUsage]
        if kind in kinds.OPTIONAL:  # their CRDs are not installed: those never sync
            informer.synced.clear()
    tracked = platform.tracked("ai-tenant-red", "red")
    assert tracked is not None
    assert [(k.kind, o["metadata"]["name"]) for k, o in tracked] == [
        ("ConfigMap", "maas-api-red-backend-ca")
    ]
    # Built-in kinds have no such excuse.
    platform._informers[(kinds.CONFIG_MAP, INFRA)].synced.clear()  # pyright: ignore[reportPrivateUsage]
    assert platform.tracked("ai-tenant-red", "red") is None
