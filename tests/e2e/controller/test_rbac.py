"""Least privilege, judged by the real API server's authorizer: the controller identity holds
Leases and Secrets only in its own namespaces, claim ConfigMaps only in the AITenant namespace,
Kuadrant policies and Gateways only in the gateway namespace, writes only Config/default, and
touches only the ClusterRoleBindings of the tenants' maas-api (the ValidatingAdmissionPolicy
in src/aitenant/manifests/rbac/binding-policy.yaml.j2).

The whole suite runs the controller with exactly these rights (``bind_controller_roles``), so
every other passing test shows they suffice; this module shows they stop where they should. Its
refused requests are named ``rbac-probe`` so the audit checks in test_security.py tell them
apart from the controller's own.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

import pytest
from devtools import samples
from devtools.cluster import LocalCluster
from devtools.maas_api import FakeMaasApi
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Event, Secret
from lightkube.resources.events_v1 import Event as EventsV1Event
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding
from lightkube.types import PatchType

from aitenant import contract
from aitenant.platform import kinds
from aitenant.resources import AITenant, Config, Gateway, MaasTenantConfig
from aitenant_charm import cluster_manifests

from ..harness import (
    AITENANT_NS,
    CONTROLLER_BINDING,
    CONTROLLER_SA,
    GATEWAY_NS,
    INFRA_NS,
    RunningController,
    bind_controller_roles,
    controller_kubeconfig,
    e2e_settings,
)
from ..tenants import Names, make_tenant, wait_phase

pytestmark = pytest.mark.e2e

PROBE = "rbac-probe"
OUTSIDE = "kube-system"


@pytest.fixture
async def as_controller(cluster: LocalCluster, kube: AsyncClient) -> AsyncIterator[AsyncClient]:
    client = AsyncClient(KubeConfig.from_file(controller_kubeconfig(cluster)))
    yield client
    await client.close()


async def status_of(call: Callable[[], Awaitable[Any]]) -> int:
    """The HTTP status the API server answers (200 when the call succeeds)."""
    try:
        await call()
    except ApiError as exc:
        return exc.status.code or 0
    return 200


def lease(namespace: str, name: str = PROBE) -> Lease:
    return Lease(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=LeaseSpec(holderIdentity=PROBE, leaseDurationSeconds=15),
    )


def secret(namespace: str) -> Secret:
    return Secret(metadata=ObjectMeta(name=PROBE, namespace=namespace), stringData={"k": "v"})


async def test_no_lease_or_secret_writes_outside_its_namespaces(as_controller: AsyncClient) -> None:
    assert await status_of(lambda: as_controller.create(lease(OUTSIDE))) == 403
    assert await status_of(lambda: as_controller.create(secret(OUTSIDE))) == 403

    async def list_secrets() -> None:
        async for _ in as_controller.list(Secret, namespace=OUTSIDE):
            break

    assert await status_of(list_secrets) == 403
    assert (
        await status_of(
            lambda: as_controller.patch(
                Lease,
                contract.LEASE_NAME,
                {"spec": {"holderIdentity": PROBE}},
                namespace=OUTSIDE,
                patch_type=PatchType.MERGE,
            )
        )
        == 403
    )


async def test_within_its_namespaces_only_what_it_uses(as_controller: AsyncClient) -> None:
    # Its leader Lease only: another Lease's name is refused before it is even looked up.
    assert await status_of(lambda: as_controller.get(Lease, PROBE, namespace=INFRA_NS)) == 403
    assert await status_of(
        lambda: as_controller.get(Lease, contract.LEASE_NAME, namespace=INFRA_NS)
    ) in (200, 404)
    # Secrets of the infra namespace: the serving certificates and the database Secret.
    db_secret = lambda: as_controller.get(Secret, "maas-db-config", namespace=INFRA_NS)  # noqa: E731
    assert await status_of(db_secret) == 200


async def test_config_writes_only_to_default(as_controller: AsyncClient) -> None:
    patch = {"metadata": {"annotations": {"example.com/probe": "x"}}}

    def patch_config(name: str) -> Callable[[], Awaitable[Any]]:
        return lambda: as_controller.patch(Config, name, patch, patch_type=PatchType.MERGE)

    assert await status_of(patch_config(PROBE)) == 403
    # Config/default itself is allowed (404 when the suite has not created it yet).
    assert await status_of(lambda: as_controller.get(Config, contract.CONFIG_NAME)) in (200, 404)


async def test_another_infra_namespace_works_through_its_role(
    cluster: LocalCluster,
    kube: AsyncClient,
    controller: RunningController,
    maas_api: FakeMaasApi,
    unique: Names,
) -> None:
    """What the charm does when `infra-namespace` changes: the platform Role follows it."""
    infra = unique("custom-infra")
    await samples.ensure_namespace(kube, infra)
    await samples.ensure_db_secret(kube, infra)
    await bind_controller_roles(kube, infra_namespace=infra)
    name = unique("infra-moved")
    await controller.stop()
    other = RunningController(cluster, e2e_settings(maas_api, infra_namespace=infra))
    await other.start()
    try:
        await make_tenant(kube, name)
        await wait_phase(kube, name, "Active")
        # The ClusterRole grants none of these: only the Role in the new namespace does.
        deployment = await kube.get(Deployment, f"maas-api-{name}", namespace=infra)
        assert deployment.metadata is not None
        secret_name = f"maas-api-{name}-serving-cert"
        assert (await kube.get(Secret, secret_name, namespace=infra)).metadata is not None
    finally:
        await other.stop()
        await controller.start()


async def listing(client: AsyncClient, resource: Any, namespace: str) -> None:
    async for _ in client.list(resource, namespace=namespace):
        break


async def test_configmaps_only_in_the_aitenant_namespace(as_controller: AsyncClient) -> None:
    # The gateway claims live in the AITenant namespace (and the backend CA in the infra one).
    assert await status_of(lambda: listing(as_controller, ConfigMap, OUTSIDE)) == 403
    probe = ConfigMap(metadata=ObjectMeta(name=PROBE, namespace=OUTSIDE), data={"k": "v"})
    assert await status_of(lambda: as_controller.create(probe)) == 403
    assert await status_of(lambda: listing(as_controller, ConfigMap, AITENANT_NS)) == 200
    assert await status_of(lambda: listing(as_controller, ConfigMap, INFRA_NS)) == 200


async def test_kuadrant_policies_and_gateways_only_in_the_gateway_namespace(
    as_controller: AsyncClient,
) -> None:
    for kind in (kinds.AUTH_POLICY, kinds.TOKEN_RATE_LIMIT_POLICY, kinds.TELEMETRY_POLICY):
        assert await status_of(partial(listing, as_controller, kind.resource, OUTSIDE)) == 403
        assert await status_of(partial(listing, as_controller, kind.resource, GATEWAY_NS)) == 200
    assert await status_of(lambda: listing(as_controller, Gateway, OUTSIDE)) == 403
    assert await status_of(lambda: listing(as_controller, Gateway, GATEWAY_NS)) == 200
    # In the infra namespace only what pruning an older version's AuthPolicy needs: no writes.
    patch = {"metadata": {"labels": {"example.com/probe": "x"}}}
    assert (
        await status_of(
            lambda: as_controller.patch(
                kinds.AUTH_POLICY.resource,
                PROBE,
                patch,
                namespace=INFRA_NS,
                patch_type=PatchType.MERGE,
            )
        )
        == 403
    )


async def test_no_verbs_the_code_does_not_use(as_controller: AsyncClient) -> None:
    # Events: created through core/v1 only, never patched. (The audit log names no object on a
    # create: test_security.py tells this probe apart by its namespace.)
    event = EventsV1Event(
        metadata=ObjectMeta(name=PROBE, namespace=OUTSIDE),
        eventTime=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        reportingController="example.com/probe",
        reportingInstance=PROBE,
        action="Probe",
        reason="Probe",
        type="Normal",
    )
    assert await status_of(lambda: as_controller.create(event)) == 403
    patch = {"metadata": {"labels": {"example.com/probe": "x"}}}
    assert (
        await status_of(
            lambda: as_controller.patch(
                Event, PROBE, patch, namespace=INFRA_NS, patch_type=PatchType.MERGE
            )
        )
        == 403
    )
    # Status subresources are replaced (update), never read or patched through them; AITenants
    # are patched, never replaced.
    for status in (AITenant.Status, MaasTenantConfig.Status):
        read = partial(as_controller.get, status, PROBE, namespace=AITENANT_NS)
        assert await status_of(read) == 403
    status_patch = {"status": {"phase": "Probe"}}
    assert (
        await status_of(
            lambda: as_controller.patch(
                AITenant.Status,
                PROBE,
                status_patch,
                namespace=AITENANT_NS,
                patch_type=PatchType.MERGE,
            )
        )
        == 403
    )
    metadata = {"name": PROBE, "namespace": AITENANT_NS}
    body = AITenant.from_dict(
        {"apiVersion": contract.API_VERSION, "kind": "AITenant", "metadata": metadata}
    )
    assert await status_of(lambda: as_controller.replace(body)) == 403


def cluster_role_binding(name: str, role: str, labels: dict[str, str] | None = None) -> Any:
    return ClusterRoleBinding(
        metadata=ObjectMeta(name=name, labels=labels),
        roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name=role),
        subjects=[Subject(kind="ServiceAccount", name=PROBE, namespace=INFRA_NS)],
    )


async def test_only_its_own_cluster_role_bindings(
    kube: AsyncClient, as_controller: AsyncClient, unique: Names
) -> None:
    """RBAC grants ClusterRoleBindings by any name; the admission policy narrows the writes to
    the tenants' maas-api bindings."""
    patch = {"metadata": {"labels": {"example.com/probe": "x"}}}

    async def refused(what: Callable[[], Awaitable[Any]]) -> str:
        with pytest.raises(ApiError) as caught:
            await what()
        assert caught.value.status.code == 403, caught.value.status.message
        return caught.value.status.message or ""

    ours = {contract.LABEL_MANAGED_BY: contract.PLATFORM_MANAGED_BY_VALUE}
    for role, labels in (("view", ours), (contract.MAAS_API_CLUSTER_ROLE, None)):
        await kube.create(cluster_role_binding(PROBE, role, labels))
        try:
            message = await refused(lambda: as_controller.delete(ClusterRoleBinding, PROBE))
            assert contract.MAAS_API_CLUSTER_ROLE in message, message
            assert contract.PLATFORM_MANAGED_BY_VALUE in message, message
            await refused(
                lambda: as_controller.patch(
                    ClusterRoleBinding, PROBE, patch, patch_type=PatchType.MERGE
                )
            )
        finally:
            with contextlib.suppress(ApiError):  # gone already when the controller could delete
                await kube.delete(ClusterRoleBinding, PROBE)
    # What the platform writes is allowed (a dry run: admission runs, nothing is stored).
    allowed = cluster_role_binding(unique("maas-api-probe"), contract.MAAS_API_CLUSTER_ROLE, ours)
    assert await status_of(lambda: as_controller.create(allowed, dry_run=True)) == 200


# The field manager the charm applies with (src/charm.py).
CHARM_FIELD_MANAGER = "aitenant-k8s"


def controller_binding(name: str, namespace: str = INFRA_NS) -> ClusterRoleBinding:
    """The controller's own ClusterRoleBinding as the charm constructs it (its hooks run as
    the controller's service account), bound to that account in ``namespace``."""
    return cluster_manifests.construct_cluster_role_binding(
        name=name, service_account=CONTROLLER_SA, namespace=namespace
    )


async def test_its_own_binding_and_no_other_of_its_cluster_role(as_controller: AsyncClient) -> None:
    """Under Juju the charm's hooks run as the controller's service account: the policy lets
    that account re-apply and delete the deployment's own binding (`own_binding`), exactly,
    and nothing else binding the controller's ClusterRole: not another name, not its own name
    bound to an account elsewhere. The delete and the refused writes are dry runs (admission
    runs, nothing is stored): the suite's controller needs that binding. The refused ones are
    applied as field manager rbac-probe, which test_security.py counts as a probe."""
    own = controller_binding(CONTROLLER_BINDING)
    applied = await as_controller.apply(own, field_manager=CHARM_FIELD_MANAGER, force=True)
    assert applied.roleRef.name == contract.CONTROLLER_NAME
    assert applied.metadata is not None
    assert (applied.metadata.labels or {}).items() >= contract.KEPT_BY_JUJU_LABELS.items()
    deleted = await status_of(
        lambda: as_controller.delete(ClusterRoleBinding, CONTROLLER_BINDING, dry_run=True)
    )
    assert deleted == 200
    other = controller_binding(PROBE)
    elsewhere = controller_binding(CONTROLLER_BINDING, namespace=OUTSIDE)
    for refused in (other, elsewhere):
        with pytest.raises(ApiError) as caught:
            await as_controller.apply(refused, field_manager=PROBE, force=True, dry_run=True)
        assert caught.value.status.code == 403, caught.value.status.message
        # Refused by the policy (its message), not by RBAC.
        assert "may write only" in (caught.value.status.message or ""), caught.value.status
