"""Cluster objects the charm applies for the controller. Pure: ``api_server_writes`` applies them.

The CRDs, ClusterRoles and the namespaced Roles come from the ``aitenant`` package
(``aitenant/manifests/``, through ``aitenant.manifests``), the same files the
controller's tests use. The bindings and the ValidatingWebhookConfiguration depend on where the
charm runs, so they are constructed here. Nothing in this module does I/O against the cluster;
the loaders only read files shipped with the package.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lightkube import codecs
from lightkube.core.resource import Resource
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.models.networking_v1 import (
    IPBlock,
    NetworkPolicyIngressRule,
    NetworkPolicyPeer,
    NetworkPolicyPort,
    NetworkPolicySpec,
)
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.admissionregistration_v1 import (
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
)
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.networking_v1 import NetworkPolicy
from lightkube.resources.rbac_authorization_v1 import (
    ClusterRole,
    ClusterRoleBinding,
    Role,
    RoleBinding,
)

import aitenant
from aitenant import contract, manifests
from aitenant.webhook.config import render_webhook_configuration

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

# The ClusterRole in aitenant/manifests/rbac/clusterrole.yaml that the controller runs with.
CONTROLLER_CLUSTER_ROLE = contract.CONTROLLER_NAME
# Every object the charm creates carries this label, so an operator can find them (and the
# charm selects its own Roles and bindings by it).
MANAGED_BY_LABEL = {contract.LABEL_MANAGED_BY: "aitenant-k8s"}
# The labels the charm writes on what it constructs: MANAGED_BY_LABEL, and the label Juju's
# model webhook skips, so that `juju remove-application` never deletes them behind the charm's
# back (contract.KEPT_BY_JUJU_LABELS; docs/design.md §7.1). The charm deletes what goes with
# the application itself (removal.py; README.md, "Removing the charm").
CHARM_LABELS = {**MANAGED_BY_LABEL, **contract.KEPT_BY_JUJU_LABELS}
# The controller's CRDs: AITenants are counted for the status line; the prepare-removal
# action releases our finalizers from both kinds.
AITENANT = create_namespaced_resource(contract.GROUP, contract.VERSION, "AITenant", "aitenants")
MAAS_TENANT_CONFIG = create_namespaced_resource(
    contract.GROUP, contract.VERSION, "MaasTenantConfig", "maastenantconfigs"
)


def manifests_dir() -> Path:
    """``manifests/`` inside the installed ``aitenant`` package."""
    return Path(aitenant.__file__).parent / "manifests"


def _load(folder: Path) -> list[Resource]:
    objects: list[Resource] = []
    if not folder.is_dir():
        logger.warning("manifest folder %s is missing; nothing to apply from it", folder)
        return objects
    for path in sorted(folder.glob("*.yaml")):
        objects.extend(codecs.load_all_yaml(path.read_text()))
    return objects


def kept_by_juju(objects: list[_T]) -> list[_T]:
    """``objects`` (loaded from the package's files), each labelled so that Juju's model
    webhook leaves it alone: the CRDs and ClusterRoles outlive the application."""
    for obj in objects:
        meta = getattr(obj, "metadata", None)
        if meta is None:
            raise ValueError(f"a shipped {type(obj).__name__} has no metadata")
        meta.labels = {**(meta.labels or {}), **contract.KEPT_BY_JUJU_LABELS}
    return objects


def load_crds(root: Path | None = None) -> list[CustomResourceDefinition]:
    """The CRDs we ship (AITenant, MaasTenantConfig, legacy Tenant, Config)."""
    objects = _load((root or manifests_dir()) / "crds")
    return kept_by_juju([obj for obj in objects if isinstance(obj, CustomResourceDefinition)])


def load_cluster_roles(root: Path | None = None) -> list[ClusterRole]:
    """The controller's ClusterRole and the ``maas-api`` ClusterRole it binds tenants to."""
    objects = _load((root or manifests_dir()) / "rbac")
    return kept_by_juju([obj for obj in objects if isinstance(obj, ClusterRole)])


# With `--trust` Juju creates a ClusterRole and a ClusterRoleBinding named `<model>-<app>`.
# Juju's model and application names hold only [a-z0-9-], so names of ours with a dot can never
# be one of Juju's, and dots between the parts keep two deployments' names apart ("m-a", "b"
# and "m", "a-b" are two names). docs/design.md §7.1.
CLUSTER_NAME_PREFIX = "aitenant"
# A DNS-1123 subdomain has at most 253 characters; the Roles add suffixes to the name
# (`-leader-election`, the longest, is 16), so a longer name is cut and ends in a hash.
CLUSTER_NAME_LIMIT = 253 - 32
_NAME_HASH_LENGTH = 10


def cluster_scoped_name(app: str, model: str) -> str:
    """Name of a cluster-scoped object owned by one deployment: ``aitenant.<model>.<app>``,
    unique per model and app and never a name Juju gives (a longer one is cut, plus a hash
    of the whole, deterministically)."""
    name = f"{CLUSTER_NAME_PREFIX}.{model}.{app}"
    if len(name) <= CLUSTER_NAME_LIMIT:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_NAME_HASH_LENGTH]
    head = name[: CLUSTER_NAME_LIMIT - _NAME_HASH_LENGTH - 1].rstrip(".-")
    return f"{head}-{digest}"


def construct_cluster_role_binding(
    *, name: str, service_account: str, namespace: str, role: str = CONTROLLER_CLUSTER_ROLE
) -> ClusterRoleBinding:
    """Bind ``role`` to the app's service account (the workload runs under it)."""
    return ClusterRoleBinding(
        metadata=ObjectMeta(name=name, labels=dict(CHARM_LABELS)),
        roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name=role),
        subjects=[Subject(kind="ServiceAccount", name=service_account, namespace=namespace)],
    )


def decode_all(docs: Iterable[dict[str, Any]], what: str, *kinds: type[_T]) -> list[_T]:
    """Rendered documents as lightkube objects, each of one of ``kinds`` (else TypeError)."""
    objects: list[_T] = []
    for doc in docs:
        obj = codecs.from_dict(doc)
        if not isinstance(obj, kinds):
            raise TypeError(f"{what} template rendered a {type(obj).__name__}")
        objects.append(obj)
    return objects


def construct_binding_policy(
    *, name: str, service_account: str, namespace: str, own_binding: str
) -> list[ValidatingAdmissionPolicy | ValidatingAdmissionPolicyBinding]:
    """The admission policy (and its binding) limiting the ClusterRoleBindings the app's
    service account may write to the tenants' ``maas-api`` ones (RBAC cannot limit them by
    name) and ``own_binding``, the deployment's own: the charm's hooks run as that same
    account and re-apply and (at removal) delete it. Rendered from the controller package's
    template, as the e2e tests apply it."""
    docs = manifests.render_binding_policy(
        name=name,
        service_account=service_account,
        service_account_namespace=namespace,
        own_binding=own_binding,
        labels=CHARM_LABELS,
    )
    return decode_all(
        docs, "binding policy", ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding
    )


def construct_webhook_configuration(
    *, name: str, ca_bundle_pem: bytes, service_name: str, service_namespace: str, port: int
) -> ValidatingWebhookConfiguration:
    """The ValidatingWebhookConfiguration pointing at the app's Service, with its caBundle.

    Rendered from the controller package's template, the same one the e2e tests apply.
    """
    body = render_webhook_configuration(
        name=name,
        ca_bundle_pem=ca_bundle_pem,
        service_name=service_name,
        service_namespace=service_namespace,
        service_port=port,
    )
    metadata = body.setdefault("metadata", {"name": name})
    metadata["labels"] = {**(metadata.get("labels") or {}), **CHARM_LABELS}
    obj = codecs.from_dict(body)
    if not isinstance(obj, ValidatingWebhookConfiguration):
        raise TypeError(f"webhook template rendered a {type(obj).__name__}")
    return obj


# Juju labels every pod of an application with its name.
JUJU_APP_LABEL = "app.kubernetes.io/name"


def webhook_network_policy_name(app: str) -> str:
    """Name of the NetworkPolicy guarding the app's webhook port (in the model's namespace)."""
    return f"{app}-webhook"


def construct_webhook_network_policy(
    *,
    app: str,
    namespace: str,
    webhook_port: int,
    open_ports: Iterable[int],
    api_server_addresses: Iterable[str],
) -> NetworkPolicy:
    """Ingress to the app's pods: the webhook port only from the API server's addresses (it
    calls admission webhooks from there), ``open_ports`` (health, metrics) from anywhere.

    Any port not listed is closed by the policy; the charm reads the webhook on loopback,
    which no NetworkPolicy filters. Without a known address the webhook port stays open to
    all: a policy admitting nobody would refuse every AITenant write.
    """
    peers = [
        NetworkPolicyPeer(ipBlock=IPBlock(cidr=f"{address}/{128 if ':' in address else 32}"))
        for address in sorted(set(api_server_addresses))
    ]
    rules = [
        NetworkPolicyIngressRule(
            from_=peers or None, ports=[NetworkPolicyPort(port=webhook_port, protocol="TCP")]
        ),
        NetworkPolicyIngressRule(
            ports=[NetworkPolicyPort(port=port, protocol="TCP") for port in sorted(open_ports)]
        ),
    ]
    return NetworkPolicy(
        metadata=ObjectMeta(
            name=webhook_network_policy_name(app),
            namespace=namespace,
            labels=dict(CHARM_LABELS),
        ),
        spec=NetworkPolicySpec(
            podSelector=LabelSelector(matchLabels={JUJU_APP_LABEL: app}),
            policyTypes=["Ingress"],
            ingress=rules,
        ),
    )


def namespaced_rbac_prefix(app: str, model: str) -> str:
    """Prefix of the Roles and RoleBindings of one deployment: unique per model and app, since
    two models may share an infra namespace."""
    return cluster_scoped_name(app, model)


@dataclass(frozen=True)
class RoleNamespaces:
    """Where the controller's Roles go besides its own namespace (the model): the namespaces
    its flags name."""

    infra: str  # --infra-namespace (the model when the charm leaves it to the default)
    aitenant: str  # --aitenant-namespace
    # --gateway-namespace, from config or the `gateway` relation; None while neither says (the
    # controller cannot start then, and a Role already there is kept).
    gateway: str | None = None


def construct_namespaced_rbac(
    *, prefix: str, controller_namespace: str, namespaces: RoleNamespaces, service_account: str
) -> list[Role | RoleBinding]:
    """Roles and RoleBindings for the controller: its leader Lease in its own namespace, the
    tenants' maas-api objects and Secrets in the infra namespace, the gateway claims in the
    AITenant namespace, the Kuadrant policies in the gateway namespace."""
    docs = manifests.render_namespaced_rbac(
        prefix=prefix,
        controller_namespace=controller_namespace,
        infra_namespace=namespaces.infra,
        aitenant_namespace=namespaces.aitenant,
        gateway_namespace=namespaces.gateway,
        service_account=service_account,
        service_account_namespace=controller_namespace,
        labels=CHARM_LABELS,
    )
    return decode_all(docs, "namespaced RBAC", Role, RoleBinding)


def stale_namespaced_rbac(
    existing: Iterable[Role | RoleBinding], desired: Iterable[Role | RoleBinding]
) -> list[Role | RoleBinding]:
    """Our Roles/RoleBindings (same names) left in namespaces we no longer use, e.g. the old
    infra namespace after `infra-namespace` changed, the old AITenant or gateway namespace after
    theirs did. Only names in ``desired`` are considered: a Role not rendered now (the gateway's
    while no gateway is known) is kept."""
    wanted = {
        (type(obj).__name__, obj.metadata.namespace, obj.metadata.name)
        for obj in desired
        if obj.metadata
    }
    names = {(type(obj).__name__, obj.metadata.name) for obj in desired if obj.metadata}
    stale: list[Role | RoleBinding] = []
    for obj in existing:
        meta = obj.metadata
        if meta is None or (type(obj).__name__, meta.name) not in names:
            continue
        if (meta.labels or {}).get(contract.LABEL_MANAGED_BY) != MANAGED_BY_LABEL[
            contract.LABEL_MANAGED_BY
        ]:
            continue
        if (type(obj).__name__, meta.namespace, meta.name) not in wanted:
            stale.append(obj)
    return stale


def names(objects: Iterable[Resource]) -> list[str]:
    """``metadata.name`` of each object, for logs."""
    return [getattr(getattr(obj, "metadata", None), "name", "?") or "?" for obj in objects]
