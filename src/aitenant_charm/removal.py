"""Removal: the prepare-removal action, and what the last unit's remove hook deletes.

Nothing here revokes or deletes a tenant. ``prepare_removal`` deletes the webhook configuration
(no unit will serve it) and releases the controller's finalizers, so that deleting a tenant
after the charm is gone never hangs. ``delete_deployment_objects`` drops what would break the
cluster without the app: the webhook configuration (it would reject every AITenant write), the
bindings and Roles granting rights to a service account that is going away, the admission
policy on what that account may write, and the NetworkPolicy of its pods. CRDs,
ClusterRoles and tenants hold or serve user data and are never deleted; nor does Juju delete
them, since everything the charm and the controller create carries the label Juju's model
webhook skips (``contract.KEPT_BY_JUJU_LABELS``; docs/design.md §7.1). Objects
named `<model>-<app>` are Juju's own (its `--trust` ClusterRole and binding): ours are named
by ``cluster_manifests.cluster_scoped_name`` and can never be one of those.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.admissionregistration_v1 import (
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
)
from lightkube.resources.networking_v1 import NetworkPolicy
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding, Role, RoleBinding
from lightkube.types import PatchType

from aitenant import contract
from aitenant_charm import cluster_manifests

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Released:
    """The objects whose finalizer prepare-removal released, as ``namespace/name``."""

    aitenants: list[str]
    configs: list[str]

    def results(self) -> dict[str, str]:
        """The action's results."""
        return {
            "aitenants": " ".join(self.aitenants) or "none",
            "maastenantconfigs": " ".join(self.configs) or "none",
            "released": str(len(self.aitenants) + len(self.configs)),
        }


def prepare_removal(kube: Client, *, app: str, model: str) -> Released:
    """Delete the webhook configuration and release the controller's finalizers. Raises
    ApiError when the cluster refuses (the action fails; running it again goes on)."""
    name = cluster_manifests.cluster_scoped_name(app, model)
    delete_cluster_scoped(kube, ValidatingWebhookConfiguration, name)
    return Released(
        aitenants=release_finalizers(kube, cluster_manifests.AITENANT, contract.AITENANT_FINALIZER),
        configs=release_finalizers(
            kube, cluster_manifests.MAAS_TENANT_CONFIG, contract.TENANT_CONFIG_FINALIZER
        ),
    )


def delete_deployment_objects(kube: Client, *, app: str, model: str) -> None:
    """Delete our webhook configuration, ClusterRoleBinding, Roles and RoleBindings, and the
    admission policy on that service account's ClusterRoleBinding writes (its binding first);
    log (and go on past) what the cluster refuses, since the app is going anyway.

    The hooks run as the controller's service account, so the ClusterRoleBinding is deleted
    while the admission policy still holds: the policy admits that account's own binding
    (``own_binding``), and deleting the policy first would leave the account free to write any
    ClusterRoleBinding in between."""
    name = cluster_manifests.cluster_scoped_name(app, model)
    for kind in (
        ValidatingWebhookConfiguration,
        ClusterRoleBinding,
        ValidatingAdmissionPolicyBinding,
        ValidatingAdmissionPolicy,
    ):
        try:
            delete_cluster_scoped(kube, kind, name)
        except ApiError as exc:
            logger.warning("could not delete %s %s: %s", kind.__name__, name, exc)
    policy = cluster_manifests.webhook_network_policy_name(app)
    try:
        kube.delete(NetworkPolicy, policy, namespace=model)
    except ApiError as exc:
        if exc.status.code != 404:
            logger.warning("could not delete NetworkPolicy %s/%s: %s", model, policy, exc)
    prefix = cluster_manifests.namespaced_rbac_prefix(app, model) + "-"
    for namespaced in (RoleBinding, Role):
        try:
            for obj in kube.list(
                namespaced, namespace="*", labels={**cluster_manifests.MANAGED_BY_LABEL}
            ):
                meta = obj.metadata
                if meta and meta.name and meta.name.startswith(prefix):
                    kube.delete(namespaced, meta.name, namespace=meta.namespace)
        except ApiError as exc:
            if exc.status.code != 404:
                logger.warning("could not delete %s objects: %s", namespaced.__name__, exc)


def delete_cluster_scoped(kube: Client, kind: Any, name: str) -> None:
    """Delete one cluster-scoped object; already gone is fine."""
    try:
        kube.delete(kind, name)
    except ApiError as exc:
        if exc.status.code != 404:
            raise


def release_finalizers(kube: Client, res: Any, finalizer: str) -> list[str]:
    """Remove ``finalizer`` from every object of ``res``; ``namespace/name`` of each."""
    released: list[str] = []
    for obj in kube.list(res, namespace="*"):
        meta = obj.metadata
        if meta is None or finalizer not in (meta.finalizers or []):
            continue
        if drop_finalizer(kube, res, obj, finalizer):
            released.append(f"{meta.namespace}/{meta.name}")
    return released


def drop_finalizer(kube: Client, res: Any, obj: Any, finalizer: str, attempts: int = 5) -> bool:
    """Patch ``finalizer`` out of ``obj``; on a conflict, re-read and try again.

    resourceVersion makes the patch fail on a concurrent change (a status write, another
    finalizer) instead of dropping someone else's finalizer.
    """
    for attempt in range(attempts):
        meta = obj.metadata
        finalizers = list(meta.finalizers or [])
        if finalizer not in finalizers:
            return False
        remaining = [f for f in finalizers if f != finalizer]
        patch = {"metadata": {"finalizers": remaining, "resourceVersion": meta.resourceVersion}}
        try:
            kube.patch(res, meta.name, patch, namespace=meta.namespace, patch_type=PatchType.MERGE)
            return True
        except ApiError as exc:
            if exc.status.code == 404:
                return False
            if exc.status.code != 409 or attempt == attempts - 1:
                raise
        obj = kube.get(res, meta.name, namespace=meta.namespace)
    return False
