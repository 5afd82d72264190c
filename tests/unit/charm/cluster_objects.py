"""What the charm's cluster-object tests share: the deployment's object names and Roles.

Used by test_charm_cluster.py, test_charm_namespaced_roles.py and test_charm_cluster_removal.py:
the name of the deployment's cluster-scoped objects (spelled out here, never taken from the
charm), the AITenant namespace, where the Roles and RoleBindings the fake Client was given
live, and Roles or RoleBindings as stored in the cluster for the fake Client to list.
"""

from __future__ import annotations

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding
from tests.juju.kit import APP, MODEL

from aitenant import contract
from aitenant_charm.cluster_manifests import MANAGED_BY_LABEL

# The name of the deployment's cluster-scoped objects (never Juju's `<model>-<app>`).
OURS = f"aitenant.{MODEL}.{APP}"
PREFIX = OURS
AITENANT_NS = contract.DEFAULT_AITENANT_NAMESPACE


def where(objects: list[Role | RoleBinding]) -> set[tuple[str, str | None, str | None]]:
    return {
        (type(obj).__name__, obj.metadata.namespace, obj.metadata.name)
        for obj in objects
        if obj.metadata
    }


def stored_object(
    kind: type, namespace: str, name: str, managed: bool = True
) -> Role | RoleBinding:
    labels = dict(MANAGED_BY_LABEL) if managed else {}
    metadata = ObjectMeta(name=name, namespace=namespace, labels=labels)
    if kind is RoleBinding:
        ref = RoleRef(apiGroup="rbac.authorization.k8s.io", kind="Role", name=name)
        return RoleBinding(metadata=metadata, roleRef=ref)
    return Role(metadata=metadata)
