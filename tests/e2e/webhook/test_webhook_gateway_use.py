"""Attaching an AITenant to a Gateway is a right a network admin grants (docs/differences.md
D34), and the default tenant's name is the default Gateway's (docs/differences.md D36): the
real API server calls the webhook over HTTPS and answers its SubjectAccessReviews.

The requester is a user bound only to AITenant rights in the AITenant namespace, acting through
the API server's impersonation from the admin identity; the network admin's grant is a Role and
RoleBinding in the gateway namespace, as docs/contract.md §2.4 shows.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from devtools import samples
from devtools.cluster import ADMIN_TOKEN, LocalCluster
from devtools.maas_api import FakeMaasApi
from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule, RoleRef, Subject
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding
from lightkube.types import PatchType

from aitenant import contract
from aitenant.resources import AITenant, Config

from ..harness import (
    AITENANT_NS,
    GATEWAY_NS,
    RunningController,
    WebhookTLS,
    e2e_settings,
    eventually,
)
from ..tenants import Names
from .test_webhook import CONFIG_NAME, denied, register, until_webhook_answers

pytestmark = pytest.mark.e2e

DEFAULT = contract.DEFAULT_TENANT_NAME
DEFAULT_GATEWAY = "maas-default-gateway"
TENANTS = f"/apis/{contract.API_VERSION}/namespaces/{AITENANT_NS}/aitenants"


@pytest.fixture
async def admission(
    kube: AsyncClient, controller: RunningController, webhook_tls: WebhookTLS
) -> AsyncIterator[WebhookTLS]:
    """The webhook registered with the API server for the duration of one test."""
    await register(kube, webhook_tls)
    await until_webhook_answers(kube, f"probe-use-{id(webhook_tls)}")
    yield webhook_tls
    await kube.delete(ValidatingWebhookConfiguration, CONFIG_NAME)


@contextlib.asynccontextmanager
async def acting_as(cluster: LocalCluster, user: str) -> AsyncIterator[httpx.AsyncClient]:
    """Requests as ``user`` (impersonated by the admin, so no token file changes)."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Impersonate-User": user}
    # verify=False: the local API server's certificate is self-signed (as in its kubeconfig).
    async with httpx.AsyncClient(base_url=cluster.server, verify=False, headers=headers) as http:
        yield http


async def bind(
    kube: AsyncClient, name: str, namespace: str, user: str, rules: list[PolicyRule]
) -> None:
    meta = ObjectMeta(name=name, namespace=namespace)
    await kube.create(Role(metadata=meta, rules=rules))
    await kube.create(
        RoleBinding(
            metadata=meta,
            roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="Role", name=name),
            subjects=[Subject(kind="User", name=user, apiGroup="rbac.authorization.k8s.io")],
        )
    )


async def requester(kube: AsyncClient, unique: Names) -> str:
    """A user who may create and change AITenants in the AITenant namespace, nothing else."""
    user = unique("requester")
    rule = PolicyRule(
        apiGroups=[contract.GROUP],
        resources=["aitenants"],
        verbs=["get", "create", "update", "patch"],
    )
    await bind(kube, f"{user}-aitenants", AITENANT_NS, user, [rule])
    return user


async def grant_use(kube: AsyncClient, user: str, gateway: str) -> None:
    """What a network admin writes (docs/contract.md §2.4)."""
    rule = PolicyRule(
        apiGroups=["gateway.networking.k8s.io"],
        resources=["gateways"],
        resourceNames=[gateway],
        verbs=["use"],
    )
    await bind(kube, f"{user}-use-{gateway}", GATEWAY_NS, user, [rule])


def refusal(user: str, gateway: str) -> str:
    return denied(
        f'user "{user}" may not use Gateway {GATEWAY_NS}/{gateway}: a network admin grants it '
        "with a Role rule {apiGroups: [gateway.networking.k8s.io], resources: [gateways], "
        f"resourceNames: [{gateway}], verbs: [use]}} in namespace {GATEWAY_NS}"
    )


def reserved(gateway: str) -> str:
    return denied(
        f'AITenant name "{DEFAULT}" is reserved for the default tenant on the default Gateway '
        f"{GATEWAY_NS}/{DEFAULT_GATEWAY}; got Gateway {GATEWAY_NS}/{gateway}: choose another "
        "name or remove spec.gateway.name"
    )


def message(response: httpx.Response) -> str:
    return str(response.json().get("message", ""))


async def test_a_requester_needs_use_on_the_gateway_on_create_and_on_every_move(
    cluster: LocalCluster, kube: AsyncClient, admission: WebhookTLS, unique: Names
) -> None:
    user = await requester(kube, unique)
    name, web, other = unique("req"), unique("web"), unique("other")
    for gateway in (web, other):
        await samples.create_gateway(kube, samples.gateway(gateway, GATEWAY_NS))
    body = samples.aitenant(name, AITENANT_NS, gateway_name=web)
    async with acting_as(cluster, user) as http:
        refused = await http.post(TENANTS, json=body)
        assert refused.status_code == 403, refused.text
        assert message(refused) == refusal(user, web)
        with pytest.raises(ApiError):
            await kube.get(AITenant, name, namespace=AITENANT_NS)

        await grant_use(kube, user, web)

        async def created() -> bool:
            response = await http.post(TENANTS, json=body)
            assert response.status_code == 201, response.text
            return True

        await eventually(created)  # once the API server's RBAC has seen the grant

        # An update that keeps the Gateway attaches to nothing new: not asked again.
        headers = {"Content-Type": "application/merge-patch+json"}
        relabel = {"metadata": {"labels": {"team": "a"}}}
        kept = await http.patch(f"{TENANTS}/{name}", json=relabel, headers=headers)
        assert kept.status_code == 200, kept.text
        # A move to a Gateway the requester may not use is refused, naming that Gateway.
        move = {"spec": {"gateway": {"name": other}}}
        moved = await http.patch(f"{TENANTS}/{name}", json=move, headers=headers)
        assert moved.status_code == 403, moved.text
        assert message(moved) == refusal(user, other)
    stored = await kube.get(AITenant, name, namespace=AITENANT_NS)
    assert stored["spec"]["gateway"] == {"name": web}


async def test_a_cluster_admin_notices_nothing(
    kube: AsyncClient, admission: WebhookTLS, unique: Names
) -> None:
    name, gateway = unique("admin-made"), unique("admin-gw")
    created = await samples.create_aitenant(
        kube, samples.aitenant(name, AITENANT_NS, gateway_name=gateway)
    )
    assert created["spec"]["gateway"] == {"name": gateway}
    moved = unique("admin-gw")
    patch = {"spec": {"gateway": {"name": moved}}}
    await kube.patch(AITenant, name, patch, namespace=AITENANT_NS, patch_type=PatchType.MERGE)
    assert (await kube.get(AITenant, name, namespace=AITENANT_NS))["spec"]["gateway"] == {
        "name": moved
    }


async def test_the_default_tenants_name_is_refused_on_any_other_gateway_even_to_an_admin(
    kube: AsyncClient, admission: WebhookTLS, unique: Names
) -> None:
    gateway = unique("own-gw")
    for body, named in (
        (samples.aitenant(DEFAULT, AITENANT_NS, gateway_name=gateway), gateway),
        (samples.aitenant(DEFAULT, AITENANT_NS), DEFAULT),  # its Gateway is then its own name
    ):
        with pytest.raises(ApiError) as info:
            await samples.create_aitenant(kube, body)
        assert info.value.status.message == reserved(named)


async def test_a_requester_cannot_take_the_default_gateway_first(
    cluster: LocalCluster, kube: AsyncClient, admission: WebhookTLS, unique: Names
) -> None:
    """Problem 3's second attack: any AITenant on the default Gateway before the bootstrap,
    or the default tenant itself there."""
    user = await requester(kube, unique)
    async with acting_as(cluster, user) as http:
        for name in (unique("squat"), DEFAULT):
            body = samples.aitenant(name, AITENANT_NS, gateway_name=DEFAULT_GATEWAY)
            response = await http.post(TENANTS, json=body)
            assert response.status_code == 403, response.text
            assert message(response) == refusal(user, DEFAULT_GATEWAY)


async def get_optional(kube: AsyncClient, kind: Any, name: str, ns: str | None) -> Any:
    try:
        return await kube.get(kind, name, namespace=ns)
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise


async def test_the_bootstrap_creates_the_default_tenant_through_the_webhook(
    cluster: LocalCluster,
    kube: AsyncClient,
    admission: WebhookTLS,
    controller: RunningController,
    maas_api: FakeMaasApi,
) -> None:
    """The controller's own create is asked like anyone's: its Role holds `use` on the
    default Gateway (manifests/rbac/namespaced.yaml.j2)."""
    assert await get_optional(kube, AITenant, DEFAULT, AITENANT_NS) is None
    with contextlib.suppress(ApiError):
        await samples.create_gateway(kube, samples.gateway(DEFAULT_GATEWAY, GATEWAY_NS))
    # A new Config lifecycle: an earlier one's marker would say the tenant was deleted on
    # purpose (docs/contract.md §4.1).
    with contextlib.suppress(ApiError):
        await kube.delete(Config, "default")
    await eventually(lambda: _absent(kube, Config, "default", None))
    await controller.stop()
    bootstrapper = RunningController(
        cluster, e2e_settings(maas_api, admission, manage_default_tenant=True)
    )
    try:
        await bootstrapper.start()
        tenant = await eventually(
            lambda: get_optional(kube, AITenant, DEFAULT, AITENANT_NS), timeout=30
        )
        assert tenant["spec"] == {"gateway": {"name": DEFAULT_GATEWAY}}
    finally:
        await bootstrapper.stop()
        await controller.start()
    # The session controller (which does not bootstrap) takes it down again.
    with contextlib.suppress(ApiError):
        await kube.delete(AITenant, DEFAULT, namespace=AITENANT_NS)
    await eventually(lambda: _absent(kube, AITenant, DEFAULT, AITENANT_NS), timeout=60)


async def _absent(kube: AsyncClient, kind: Any, name: str, ns: str | None) -> bool:
    return await get_optional(kube, kind, name, ns) is None
