"""The cluster objects the controller needs: the files of this folder (CRDs, RBAC, the webhook
configuration template) and what reads them. Pure.

The charm applies them and the end-to-end tests install the same ones, so the controller is
always tested with exactly the schemas and rights it ships with.

* ``crd_documents()``: the CRDs we ship. Their schemas carry the CEL rules of the contract's CRDs
  (``x-kubernetes-validations``), which every Kubernetes we support evaluates.
* ``cluster_role_documents()``: the controller's ClusterRole and the shared ``maas-api`` one.
* ``render_namespaced_rbac(...)``: the Roles and RoleBindings of the controller namespace
  (leader Lease), of the infra namespace (the tenants' maas-api objects and Secrets), of the
  AITenant namespace (the gateway claim ConfigMaps) and of the gateway namespace (the Kuadrant
  policies).
* ``render_binding_policy(...)``: the ValidatingAdmissionPolicy (and its binding) that limits the
  ClusterRoleBindings the controller may write to the tenants' ``maas-api`` ones.

(``webhook/config.py`` renders ``webhook.yaml.j2``.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

import jinja2
import yaml

from aitenant import contract

MANIFESTS: Final = Path(__file__).resolve().parent
CRDS: Final = MANIFESTS / "crds"
RBAC: Final = MANIFESTS / "rbac"
NAMESPACED_RBAC_TEMPLATE: Final = RBAC / "namespaced.yaml.j2"
BINDING_POLICY_TEMPLATE: Final = RBAC / "binding-policy.yaml.j2"

Doc = dict[str, Any]


def _documents(path: Path) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(path.read_text("utf-8")) if doc]


def crd_documents(folder: Path = CRDS) -> list[Doc]:
    """Every CRD in ``folder`` (ours by default)."""
    return [doc for path in sorted(folder.glob("*.yaml")) for doc in _documents(path)]


def cluster_role_documents(folder: Path = RBAC) -> list[Doc]:
    """The ClusterRoles we ship: the controller's and the ``maas-api`` one it binds."""
    docs = [doc for path in sorted(folder.glob("*.yaml")) for doc in _documents(path)]
    return [doc for doc in docs if doc.get("kind") == "ClusterRole"]


@cache
def _template(path: Path) -> jinja2.Template:
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
    )
    # A JSON string is a valid YAML scalar: no value can break the document's structure.
    env.filters["q"] = lambda value: json.dumps(str(value))
    return env.from_string(path.read_text("utf-8"))


def render_namespaced_rbac(
    *,
    prefix: str,
    controller_namespace: str,
    infra_namespace: str,
    aitenant_namespace: str,
    service_account: str,
    service_account_namespace: str,
    gateway_namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> list[Doc]:
    """Role + RoleBinding ``<prefix>-leader-election`` in the controller namespace,
    ``<prefix>-platform`` in the infra namespace, ``<prefix>-claims`` in the AITenant
    namespace and, when ``gateway_namespace`` is known, ``<prefix>-gateway`` there, bound to
    the controller's service account."""
    values = {
        "prefix": prefix,
        "controller_namespace": controller_namespace,
        "infra_namespace": infra_namespace,
        "aitenant_namespace": aitenant_namespace,
        "service_account": service_account,
        "service_account_namespace": service_account_namespace,
    }
    _require(values)
    rendered = _template(NAMESPACED_RBAC_TEMPLATE).render(
        **values,
        gateway_namespace=gateway_namespace or "",
        labels=dict(labels or {}),
        lease_name=contract.LEASE_NAME,
    )
    return _documents_from(rendered, NAMESPACED_RBAC_TEMPLATE)


def _require(values: Mapping[str, str]) -> None:
    for key, value in values.items():
        if not value:
            raise ValueError(f"{key} is required")


def render_binding_policy(
    *,
    name: str,
    service_account: str,
    service_account_namespace: str,
    own_binding: str,
    labels: Mapping[str, str] | None = None,
) -> list[Doc]:
    """ValidatingAdmissionPolicy ``name`` and its binding: requests by the controller's service
    account may create, update, patch and delete only ClusterRoleBindings of ClusterRole
    ``maas-api`` that carry the platform's managed-by label, and ``own_binding``, exactly the
    binding of the controller's ClusterRole to that service account (the charm's hooks run as
    the same account)."""
    values = {
        "name": name,
        "service_account": service_account,
        "service_account_namespace": service_account_namespace,
        "own_binding": own_binding,
    }
    _require(values)
    rendered = _template(BINDING_POLICY_TEMPLATE).render(
        **values,
        controller_role=contract.CONTROLLER_NAME,
        username=f"system:serviceaccount:{service_account_namespace}:{service_account}",
        labels=dict(labels or {}),
        maas_api_role=contract.MAAS_API_CLUSTER_ROLE,
        managed_by_label=contract.LABEL_MANAGED_BY,
        managed_by_value=contract.PLATFORM_MANAGED_BY_VALUE,
    )
    return _documents_from(rendered, BINDING_POLICY_TEMPLATE)


def _documents_from(text: str, template: Path) -> list[Doc]:
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    for doc in docs:
        if not isinstance(doc, dict):
            raise ValueError(f"{template.name} rendered a non-mapping document")
    return docs
