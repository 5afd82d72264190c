"""Nothing a tenant admin writes reaches another tenant (docs/contract.md §3.7).

A tenant admin here is a user of the API server bound only to the tenant-admin Role the
controller creates: it may ``update`` and ``patch`` its ``MaasTenantConfig/default-tenant``,
labels and annotations included, and nothing else of ours. Each test acts as that user where
that is how the hole it guards against could be used, and as the operator otherwise.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from devtools import samples
from devtools.cluster import LocalCluster
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.rbac_authorization_v1 import RoleBinding
from lightkube.types import PatchType

from aitenant import contract, naming
from aitenant.platform import kinds
from aitenant.resources import AITenant, MaaSSubscription, MaasTenantConfig

from ..harness import (
    AITENANT_NS,
    GATEWAY_NS,
    INFRA_NS,
    TENANT_ADMIN_USER,
    RunningController,
    controller_kubeconfig,
    eventually,
)
from ..tenants import Names, make_tenant, ready, wait_phase
from .tenant_platform import (
    SCOPES,
    absent,
    config_with_reason,
    expected_platform,
    get,
    get_config,
    platform_of,
)

pytestmark = pytest.mark.e2e

CONFIG = contract.TENANT_CONFIG_NAME


@pytest.fixture
async def tenant_admin(cluster: LocalCluster) -> AsyncIterator[AsyncClient]:
    """The API as the tenant-admin user (bound per test with ``grant_tenant_admin``)."""
    config = KubeConfig.from_file(cluster.kubeconfig_for(TENANT_ADMIN_USER))
    client = AsyncClient(config, field_manager="tenant-admin")
    yield client
    await client.close()


async def grant_tenant_admin(kube: AsyncClient, tenant: str) -> None:
    """What a platform administrator does: bind the user to the tenant's admin Role."""
    namespace = naming.tenant_namespace_for(tenant, contract.DEFAULT_SUBSCRIPTION_NAMESPACE)
    role = naming.tenant_admin_role_name(tenant)
    binding = RoleBinding(
        metadata=ObjectMeta(name=f"{role}-probe", namespace=namespace),
        roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="Role", name=role),
        subjects=[Subject(kind="User", name=TENANT_ADMIN_USER.name)],
    )
    await kube.create(binding)

    # The API server's authorizer learns of a binding from its own watch: under load a request
    # sent at once may still be refused. Wait until it would be allowed, as a user would.
    async def allowed() -> bool:
        review = SubjectAccessReview(
            spec=SubjectAccessReviewSpec(
                user=TENANT_ADMIN_USER.name,
                resourceAttributes=ResourceAttributes(
                    group=contract.GROUP,
                    resource="maastenantconfigs",
                    verb="patch",
                    namespace=namespace,
                    name=CONFIG,
                ),
            )
        )
        answer = await kube.create(review)
        return bool(answer.status and answer.status.allowed)

    await eventually(allowed)


async def patch_config(client: AsyncClient, tenant: str, metadata: dict[str, Any]) -> None:
    await client.patch(
        MaasTenantConfig,
        CONFIG,
        {"metadata": metadata},
        namespace=f"ai-tenant-{tenant}",
        patch_type=PatchType.MERGE,
    )


async def env_of(kube: AsyncClient, deployment: str) -> dict[str, str]:
    obj = await get(kube, kinds.DEPLOYMENT, deployment, INFRA_NS)
    container = obj["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container["env"]}


async def first_of(listing: AsyncIterable[Any]) -> None:
    async for _ in listing:
        break


async def refusal(call: Awaitable[Any]) -> int:
    """The HTTP status the API server answers (200 when the call succeeds)."""
    try:
        await call
    except ApiError as exc:
        return exc.status.code or 0
    return 200


async def holds_for(check: Callable[[], Awaitable[None]], seconds: float) -> None:
    """``check`` passes at every look for ``seconds`` (it raises the first time it does not)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        await check()
        await asyncio.sleep(0.1)


async def test_a_tenant_admin_cannot_take_over_another_tenant_or_make_one_up(
    kube: AsyncClient, tenant_admin: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Issue scenarios 1-3: the admin of ``alice`` relabels their config as ``bob``, as the
    default tenant and as names nobody created. ``bob``'s platform keeps its own namespace,
    no platform is rendered for the other names, alice's labels are put back, and once alice
    is deleted nothing rendered for alice is left."""
    alice, bob = unique("alice"), unique("bob")
    for name in (alice, bob):
        await make_tenant(kube, name)
    for name in (alice, bob):
        await wait_phase(kube, name, "Active")
    await grant_tenant_admin(kube, alice)
    bobs_platform = await platform_of(kube, bob)
    made_up = [unique("nobody"), unique("nobody")]

    async def bob_untouched() -> None:
        env = await env_of(kube, f"maas-api-{bob}")
        assert env["MAAS_SUBSCRIPTION_NAMESPACE"] == f"ai-tenant-{bob}", env
        assert await platform_of(kube, bob) == bobs_platform
        for name in made_up:
            assert await platform_of(kube, name) == set(), name
        assert await absent(kube, kinds.DEPLOYMENT, "maas-api", INFRA_NS), "default's maas-api"

    for claimed in (bob, contract.DEFAULT_TENANT_NAME, *made_up):
        namespace = f"ai-tenant-{claimed}"
        await patch_config(
            tenant_admin,
            alice,
            {
                "labels": {
                    contract.LABEL_TENANT_NAME: claimed,
                    contract.LABEL_TENANT_NAMESPACE: namespace,
                },
                "annotations": {contract.ANNOTATION_AITENANT_NAME: claimed},
            },
        )
        await holds_for(bob_untouched, 1.5)

    async def put_back() -> bool:
        config = await get_config(kube, alice)
        labels, annotations = config["metadata"]["labels"], config["metadata"]["annotations"]
        return (
            labels[contract.LABEL_TENANT_NAME] == alice
            and labels[contract.LABEL_TENANT_NAMESPACE] == f"ai-tenant-{alice}"
            and annotations[contract.ANNOTATION_AITENANT_NAME] == alice
        )

    await eventually(put_back)
    await wait_phase(kube, alice, "Active")
    env = await env_of(kube, f"maas-api-{alice}")
    assert env["MAAS_SUBSCRIPTION_NAMESPACE"] == f"ai-tenant-{alice}"

    await kube.delete(AITenant, alice, namespace=AITENANT_NS)

    async def all_gone() -> bool:
        return all([await platform_of(kube, name) == set() for name in (alice, *made_up)])

    await eventually(all_gone, timeout=30)
    await bob_untouched()


async def test_a_config_in_a_namespace_no_aitenant_owns_renders_nothing(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """A ``default-tenant`` labelled as another tenant's, in a tenant namespace whose AITenant
    does not exist, is refused naming what it lacks; nothing is rendered from its labels."""
    ghost, victim = unique("ghost"), unique("victim")
    tns = f"ai-tenant-{ghost}"
    await samples.ensure_namespace(kube, tns)
    body = {
        "apiVersion": contract.API_VERSION,
        "kind": "MaasTenantConfig",
        "metadata": {
            "name": CONFIG,
            "namespace": tns,
            "labels": {
                contract.LABEL_MANAGED_BY_AITENANT: "true",
                contract.LABEL_TENANT_NAME: victim,
                contract.LABEL_TENANT_NAMESPACE: tns,
            },
            "annotations": {
                contract.ANNOTATION_AITENANT_NAME: victim,
                contract.ANNOTATION_AITENANT_NAMESPACE: AITENANT_NS,
            },
        },
    }
    await kube.create(MaasTenantConfig.from_dict(body))

    condition = ready(await config_with_reason(kube, ghost, "InvalidTenantConfig"))
    assert condition["message"] == (
        f"MaasTenantConfig {tns}/{CONFIG} belongs to no AITenant: expected AITenant "
        f"{AITENANT_NS}/{ghost} with status.tenantNamespace={tns}"
    )
    assert await platform_of(kube, victim) == set()
    assert await platform_of(kube, ghost) == set()
    await kube.delete(MaasTenantConfig, CONFIG, namespace=tns)


async def test_replicas_out_of_bounds_are_refused_not_applied(
    kube: AsyncClient, tenant_admin: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Issue scenario 4: 500 replicas asked by the tenant admin never reach the Deployment;
    the config says what is wrong; a value within 1..the ceiling (3) is applied
    (docs/differences.md D35)."""
    name = unique("replicas")
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    await grant_tenant_admin(kube, name)
    annotation = contract.ANNOTATION_MAAS_API_REPLICAS
    await patch_config(tenant_admin, name, {"annotations": {annotation: "500"}})

    condition = ready(await config_with_reason(kube, name, "InvalidTenantConfig"))
    assert condition["message"].startswith(
        f'annotation {annotation}="500" exceeds the platform\'s limit 3 '
    )
    deployment = await get(kube, kinds.DEPLOYMENT, f"maas-api-{name}", INFRA_NS)
    assert deployment["spec"]["replicas"] == 1

    await patch_config(tenant_admin, name, {"annotations": {annotation: "3"}})

    async def scaled() -> bool:
        live = await get(kube, kinds.DEPLOYMENT, f"maas-api-{name}", INFRA_NS)
        return bool(live["spec"]["replicas"] == 3)

    await eventually(scaled)


async def test_names_that_once_collided_render_disjoint_platforms(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Issue scenario 5: tenants ``t`` and ``key-cleanup-t`` shared NetworkPolicy
    ``maas-api-key-cleanup-t`` and one tenant-instance value."""
    first = unique("t")
    second = f"key-cleanup-{first}"
    for name in (first, second):
        await make_tenant(kube, name)
    for name in (first, second):
        await wait_phase(kube, name, "Active")
    # Each keeps every object of its own (one NetworkPolicy was once overwritten by the other).
    assert await platform_of(kube, first) == expected_platform(first)
    assert await platform_of(kube, second) == expected_platform(second)

    async def selected_instances(tenant: str) -> set[str]:
        values = set()
        async for policy in kube.list(
            kinds.NETWORK_POLICY.resource,
            namespace=INFRA_NS,
            labels={contract.LABEL_TENANT_NAME: tenant},
        ):
            selector = policy["spec"]["podSelector"]["matchLabels"]
            values.add(selector[contract.LABEL_TENANT_INSTANCE])
        return values

    assert (await selected_instances(first)).isdisjoint(await selected_instances(second))


async def test_an_object_of_another_tenant_is_never_taken_over(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Issue item 2: an object we would render whose tracking labels name another tenant is
    left as it is, and the config says whose it is."""
    name, owner = unique("taker"), unique("holder")
    service = f"maas-api-{name}"
    theirs = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service,
            "namespace": INFRA_NS,
            "labels": {
                contract.LABEL_TENANT_NAME: owner,
                contract.LABEL_TENANT_NAMESPACE: f"ai-tenant-{owner}",
            },
        },
        "spec": {"ports": [{"port": 1234}]},
    }
    await kube.patch(
        kinds.SERVICE.resource,
        service,
        theirs,
        namespace=INFRA_NS,
        patch_type=PatchType.APPLY,
        field_manager="someone",
    )
    await make_tenant(kube, name)

    condition = ready(await config_with_reason(kube, name, "ApplyFailed"))
    assert condition["message"] == (
        f"Service {INFRA_NS}/{service} belongs to tenant {owner} "
        f"({contract.LABEL_TENANT_NAMESPACE}=ai-tenant-{owner}) and is not taken over"
    )
    live = await get(kube, kinds.SERVICE, service, INFRA_NS)
    assert live["metadata"]["labels"][contract.LABEL_TENANT_NAME] == owner
    assert [p["port"] for p in live["spec"]["ports"]] == [1234]
    await kube.delete(kinds.SERVICE.resource, service, namespace=INFRA_NS)
    await kube.delete(AITenant, name, namespace=AITENANT_NS)


async def test_a_63_character_gateway_name_works(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Issue scenario 6: a Gateway name of 60 characters or more (a valid DNS label) left
    every tenant on it Pending on its 70-character AuthPolicy name."""
    name = unique("longgw")
    gateway = f"{name}-".ljust(63, "g")
    await make_tenant(kube, name, gateway_name=gateway)
    await wait_phase(kube, name, "Active")
    policies = [
        obj["metadata"]["name"]
        async for obj in kube.list(
            kinds.AUTH_POLICY.resource,
            namespace=GATEWAY_NS,
            labels={contract.LABEL_TENANT_NAME: name},
        )
    ]
    assert policies == [naming.gateway_auth_policy_name(name, gateway)]
    assert all(len(p) <= 63 for p in policies)


def test_a_db_secret_maas_api_never_reads_stops_the_controller_at_start(
    cluster: LocalCluster,
) -> None:
    """Issue scenario 7, as the operator: with another database Secret named, the tenant went
    Active while its maas-api read maas-db-config. The controller now stops at start with one
    line naming the flag and the fix."""
    done = subprocess.run(
        [sys.executable, "-m", "aitenant", "--maas-api-db-secret=maas-db-other"],
        env={**os.environ, "KUBECONFIG": str(controller_kubeconfig(cluster))},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        'aitenant-controller: invalid value for --maas-api-db-secret: "maas-db-other": maas-api '
        "reads its database URL only from the Secret maas-db-config in its namespace; leave it "
        "unset or set maas-db-config\n"
    )


async def test_a_config_taken_out_of_scope_by_its_admin_is_still_cleaned_up(
    kube: AsyncClient, tenant_admin: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """Issue item 8: ``managed-by-aitenant=false`` written by the tenant admin on a deleting
    config (its AITenant, being deleted too, puts no label back) once took it out of the
    cleanup: the config stayed Terminating and its platform running. The tenant admin's own
    MaaSSubscription, held by a finalizer of theirs, keeps the cleanup waiting meanwhile."""
    name = unique("outofscope")
    tns = f"ai-tenant-{name}"
    hold = "example.com/hold"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    await grant_tenant_admin(kube, name)
    await kube.create(
        MaaSSubscription.from_dict(samples.maas_subscription("held", tns, finalizers=[hold]))
    )
    await kube.delete(AITenant, name, namespace=AITENANT_NS)

    async def config_deleting() -> bool:
        return bool((await get_config(kube, name))["metadata"].get("deletionTimestamp"))

    await eventually(config_deleting)
    await patch_config(
        tenant_admin, name, {"labels": {contract.LABEL_MANAGED_BY_AITENANT: "false"}}
    )
    await kube.patch(
        MaaSSubscription,
        "held",
        {"metadata": {"finalizers": None}},
        namespace=tns,
        patch_type=PatchType.MERGE,
    )

    async def gone() -> bool:
        try:
            await get_config(kube, name)
        except ApiError as exc:
            return exc.status.code == 404
        return False

    await eventually(gone, timeout=30)
    assert await platform_of(kube, name) == set()


async def test_the_tenant_admin_role_reaches_only_its_own_config(
    kube: AsyncClient, tenant_admin: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """The Role the whole module relies on, judged by the real authorizer: the admin of one
    tenant may patch its config and no other tenant's, and no platform object."""
    mine, theirs = unique("mine"), unique("theirs")
    for name in (mine, theirs):
        await make_tenant(kube, name)
    for name in (mine, theirs):
        await wait_phase(kube, name, "Active")
    await grant_tenant_admin(kube, mine)
    probe = {"annotations": {"example.com/probe": "x"}}
    await patch_config(tenant_admin, mine, probe)
    assert await refusal(patch_config(tenant_admin, theirs, probe)) == 403
    for kind, namespace in SCOPES:
        if kind.namespaced:
            listing = tenant_admin.list(kind.resource, namespace=namespace)
        else:
            listing = tenant_admin.list(kind.resource)
        assert await refusal(first_of(listing)) == 403, kind
