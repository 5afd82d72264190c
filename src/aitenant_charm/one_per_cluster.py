"""One deployment per cluster: the CRDs, ClusterRoles and webhook are cluster-wide.

Every deployment binds the controller's ClusterRole to its service account with a
ClusterRoleBinding labelled as ours; the service account's namespace is the model. The oldest
binding wins, so the first deployment keeps running and a later one stops, writes nothing and
says so (Blocked).
"""

from __future__ import annotations

from dataclasses import dataclass

from lightkube import Client
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding

from aitenant_charm import cluster


@dataclass(frozen=True)
class OtherDeployment:
    """Another deployment of this charm that already owns the cluster-scoped objects."""

    model: str
    binding: str


def other_deployment(kube: Client, *, ours: str) -> OtherDeployment | None:
    """Another model's deployment that bound the controller's ClusterRole before ``ours``
    (the name of this deployment's ClusterRoleBinding)."""
    bindings = list(kube.list(ClusterRoleBinding, labels=dict(cluster.MANAGED_BY_LABEL)))
    mine = next((b for b in bindings if b.metadata and b.metadata.name == ours), None)
    mine_created = mine.metadata.creationTimestamp if mine and mine.metadata else None
    for binding in bindings:
        if binding is mine or binding.metadata is None:
            continue
        if binding.roleRef.name != cluster.CONTROLLER_CLUSTER_ROLE:
            continue
        created = binding.metadata.creationTimestamp
        if mine_created is not None and created is not None and created >= mine_created:
            continue
        namespaces = [s.namespace for s in binding.subjects or [] if s.namespace]
        model = namespaces[0] if namespaces else "unknown"
        return OtherDeployment(model=model, binding=binding.metadata.name or "")
    return None
