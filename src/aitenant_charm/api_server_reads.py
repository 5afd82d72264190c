"""Reads from the API server, never a write: trust, its version, another deployment, the
tenant count, its own addresses.

``read_cluster_facts`` is read once per dispatch by whichever handler needs it first.
Reconcile uses the facts as guards and collect-status as rungs of its ladder, so the status
after any hook (observed by the charm or not) derives from the cluster, never from what
another handler happened to set earlier in the same process.

One deployment per cluster: the CRDs, ClusterRoles and webhook are cluster-wide. Every
deployment binds the controller's ClusterRole to its service account with a
ClusterRoleBinding labelled as ours; the service account's namespace is the model. The oldest
binding wins, so the first deployment keeps running and a later one stops, writes nothing and
says so (Blocked).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx2
from lightkube import Client
from lightkube.core.exceptions import ApiError, ConfigError
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding

from aitenant import kubernetes_version
from aitenant_charm import cluster_manifests, lightkube_private

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApiAccess:
    """Result of probing the Kubernetes API once per dispatch."""

    trusted: bool
    error: str = ""


@dataclass(frozen=True)
class OtherDeployment:
    """Another deployment of this charm that already owns the cluster-scoped objects."""

    model: str
    binding: str


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster says, read once per dispatch."""

    access: ApiAccess
    # The API server's version is older than we support: the line to show (Blocked).
    unsupported: str = ""
    # Another model's deployment serves this cluster (this one stays stopped).
    other: OtherDeployment | None = None
    # A read failed (version or ClusterRoleBindings): what failed, for a Waiting status.
    error: str = ""


def read_cluster_facts(kube: Client, *, ours: str) -> ClusterFacts:
    """Trust (one list call), the server's version, and another deployment than ``ours``."""
    access = probe_api(kube)
    if not access.trusted:
        return ClusterFacts(access=access)
    try:
        unsupported = kubernetes_version.unsupported_reason(lightkube_private.api_version(kube))
    except (httpx2.HTTPError, OSError, ValueError) as exc:
        return ClusterFacts(access=access, error=f"cannot read its version: {exc}")
    if unsupported is not None:
        return ClusterFacts(access=access, unsupported=unsupported)
    try:
        other = other_deployment(kube, ours=ours)
    except ApiError as exc:
        return ClusterFacts(access=access, error=f"{exc.status.code} {exc.status.message}")
    return ClusterFacts(access=access, other=other)


def probe_api(kube: Client) -> ApiAccess:
    """One single-item list: 403 means `juju trust` is missing; other failures say why."""
    try:
        next(iter(kube.list(CustomResourceDefinition, chunk_size=1)), None)
    except ApiError as exc:
        if exc.status.code == 403:
            return ApiAccess(trusted=False)
        return ApiAccess(trusted=False, error=f"{exc.status.code} {exc.status.message}")
    except (ConfigError, httpx2.HTTPError, OSError) as exc:
        return ApiAccess(trusted=False, error=str(exc) or type(exc).__name__)
    return ApiAccess(trusted=True)


def count_tenants(kube: Client) -> int | None:
    """AITenants in the cluster, for the status line (one single-item list, never a page
    through them all); None when the API will not say."""
    try:
        return lightkube_private.count_objects(kube, cluster_manifests.AITENANT)
    except (ApiError, httpx2.HTTPError, OSError, ValueError) as exc:
        logger.debug("could not count AITenants: %s", exc)
        return None


def other_deployment(kube: Client, *, ours: str) -> OtherDeployment | None:
    """Another model's deployment that bound the controller's ClusterRole before ``ours``
    (the name of this deployment's ClusterRoleBinding)."""
    bindings = list(kube.list(ClusterRoleBinding, labels=dict(cluster_manifests.MANAGED_BY_LABEL)))
    mine = next((b for b in bindings if b.metadata and b.metadata.name == ours), None)
    mine_created = mine.metadata.creationTimestamp if mine and mine.metadata else None
    for binding in bindings:
        if binding is mine or binding.metadata is None:
            continue
        if binding.roleRef.name != cluster_manifests.CONTROLLER_CLUSTER_ROLE:
            continue
        created = binding.metadata.creationTimestamp
        if mine_created is not None and created is not None and created >= mine_created:
            continue
        namespaces = [s.namespace for s in binding.subjects or [] if s.namespace]
        model = namespaces[0] if namespaces else "unknown"
        return OtherDeployment(model=model, binding=binding.metadata.name or "")
    return None


def api_server_addresses(kube: Client) -> list[str]:
    """The addresses the API server runs on: the endpoints of Service ``default/kubernetes``,
    from which it calls admission webhooks."""
    addresses: list[str] = []
    slices = kube.list(
        EndpointSlice, namespace="default", labels={"kubernetes.io/service-name": "kubernetes"}
    )
    for endpoint_slice in slices:
        for endpoint in endpoint_slice.endpoints or []:
            addresses.extend(endpoint.addresses)
    if not addresses:
        logger.warning("no API server address found: the webhook port stays open to all")
    return addresses
