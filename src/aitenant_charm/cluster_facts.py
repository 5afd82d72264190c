"""What the cluster says before the charm writes anything: trust, version, another deployment.

Read once per dispatch by whichever handler needs it first. Reconcile uses the facts as guards
and collect-status as rungs of its ladder, so the status after any hook (observed by the charm
or not) derives from the cluster, never from what another handler happened to set earlier in
the same process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx2
from lightkube import Client
from lightkube.core.exceptions import ApiError, ConfigError
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from aitenant import kubernetes_version
from aitenant_charm import cluster, lightkube_private
from aitenant_charm.one_per_cluster import OtherDeployment, other_deployment

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApiAccess:
    """Result of probing the Kubernetes API once per dispatch."""

    trusted: bool
    error: str = ""


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
        return lightkube_private.count_objects(kube, cluster.AITENANT)
    except (ApiError, httpx2.HTTPError, OSError, ValueError) as exc:
        logger.debug("could not count AITenants: %s", exc)
        return None
