"""Writes to the API server: the cluster objects the leader applies with server-side apply.

The CRDs (as this API server accepts them) and ClusterRoles, the ClusterRoleBinding that gives
the app's service account the controller's ClusterRole, the ValidatingAdmissionPolicy that
narrows the ClusterRoleBindings it may write to the tenants' maas-api ones, and the
controller's Roles and RoleBindings: the leader Lease in the controller namespace (the model),
the tenant platform in the infra namespace, the Kuadrant policies in the gateway namespace
(once it is known), the gateway claims in the AITenant namespace (created here when missing:
the controller creates it only when it starts, and its Role must be there first). When one of
these namespaces changes, the Roles follow and ours in the previous namespace are deleted once
the new ones are in place. The objects are built in ``cluster_manifests`` (pure); this module
writes them.
"""

from __future__ import annotations

import logging

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding

from aitenant import contract
from aitenant_charm import api_server_reads, cluster_manifests, workload

logger = logging.getLogger(__name__)


class ClusterStepError(Exception):
    """A cluster object cannot be applied for a reason the operator must fix; says which."""


def apply_cluster_objects(
    kube: Client, *, app: str, model: str, namespaces: cluster_manifests.RoleNamespaces | None
) -> None:
    """Apply the CRDs, ClusterRoles and our binding, then the namespaced RBAC in
    ``namespaces`` (None while the config is invalid: the controller keeps the Roles it has)."""
    crds = cluster_manifests.load_crds()
    roles = cluster_manifests.load_cluster_roles()
    name = cluster_manifests.cluster_scoped_name(app, model)
    binding = cluster_manifests.construct_cluster_role_binding(
        name=name, service_account=app, namespace=model
    )
    admission_policy = cluster_manifests.construct_binding_policy(
        name=name, service_account=app, namespace=model, own_binding=name
    )
    network_policy = cluster_manifests.construct_webhook_network_policy(
        app=app,
        namespace=model,
        webhook_port=workload.WEBHOOK_PORT,
        open_ports=(workload.HEALTH_PORT, workload.METRICS_PORT),
        api_server_addresses=api_server_reads.api_server_addresses(kube),
    )
    objects = (*crds, *roles, binding, *admission_policy, network_policy)
    for obj in objects:
        kube.apply(obj, force=True)
    logger.debug("applied %s", cluster_manifests.names(objects))
    if namespaces is not None:
        apply_namespaced_rbac(kube, app=app, model=model, namespaces=namespaces)


def ensure_namespace(kube: Client, name: str) -> None:
    """Create namespace ``name`` when missing, labelled as the controller labels the namespaces
    it creates (``contract.MANAGED_NAMESPACE_LABELS``), so the controller finds it as its own
    and Juju's webhook leaves it alone."""
    try:
        kube.get(Namespace, name)
        return
    except ApiError as exc:
        if exc.status.code != 404:
            raise
    body = Namespace(metadata=ObjectMeta(name=name, labels=dict(contract.MANAGED_NAMESPACE_LABELS)))
    try:
        kube.create(body)
    except ApiError as exc:
        if exc.status.code != 409:  # created meanwhile (the controller at its start)
            raise
    logger.info("created namespace %s for the controller's Role there", name)


def apply_namespaced_rbac(
    kube: Client, *, app: str, model: str, namespaces: cluster_manifests.RoleNamespaces
) -> None:
    """The controller's Roles: Lease in its namespace (``model``), platform in the infra
    namespace (which must exist), claims in the AITenant namespace (created when missing); ours
    elsewhere are deleted once these are in place."""
    infra = namespaces.infra
    ensure_namespace(kube, namespaces.aitenant)
    desired = cluster_manifests.construct_namespaced_rbac(
        prefix=cluster_manifests.namespaced_rbac_prefix(app, model),
        controller_namespace=model,
        namespaces=namespaces,
        service_account=app,
    )
    for obj in desired:
        try:
            kube.apply(obj, force=True)
        except ApiError as exc:
            namespace = obj.metadata.namespace if obj.metadata else ""
            if exc.status.code == 404 and namespace == infra != model:
                raise ClusterStepError(
                    f"infra namespace {infra!r} does not exist: create it (with the "
                    "maas-api database Secret) or change `infra-namespace`"
                ) from None
            if exc.status.code == 404 and namespace == namespaces.gateway != model:
                raise ClusterStepError(
                    f"gateway namespace {namespace!r} does not exist: deploy the Gateway there "
                    "or change `gateway-namespace`"
                ) from None
            raise
    existing: list[Role | RoleBinding] = [
        *kube.list(Role, namespace="*", labels={**cluster_manifests.MANAGED_BY_LABEL}),
        *kube.list(RoleBinding, namespace="*", labels={**cluster_manifests.MANAGED_BY_LABEL}),
    ]
    for obj in cluster_manifests.stale_namespaced_rbac(existing, desired):
        assert obj.metadata is not None
        assert obj.metadata.name is not None
        try:
            kube.delete(type(obj), obj.metadata.name, namespace=obj.metadata.namespace)
        except ApiError as exc:
            if exc.status.code != 404:
                raise
        logger.info(
            "deleted %s %s/%s (now in %s)",
            type(obj).__name__,
            obj.metadata.namespace,
            obj.metadata.name,
            namespaces,
        )
