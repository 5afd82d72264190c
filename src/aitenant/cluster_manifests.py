"""The cluster objects the controller needs, read from ``manifests/``: CRDs and RBAC. Pure.

The charm applies them and the end-to-end tests install the same ones, so the controller is
always tested with exactly the schemas and rights it ships with.

* ``crd_documents(version)``: the CRDs we ship, as the API server of that version accepts them.
  Their schemas carry the reference CRDs' CEL rules (``x-kubernetes-validations``); servers
  before 1.25 do not know that field (server-side apply refuses it), so it is dropped there and
  the admission webhook enforces the same rules instead.
* ``cluster_role_documents()``: the controller's ClusterRole and the shared ``maas-api`` one.
* ``render_namespaced_rbac(...)``: the Roles and RoleBindings of the controller namespace
  (leader Lease) and of the infra namespace (the tenants' maas-api objects and Secrets).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

import jinja2
import yaml

from aitenant import contract

MANIFESTS: Final = Path(__file__).resolve().parent / "manifests"
CRDS: Final = MANIFESTS / "crds"
RBAC: Final = MANIFESTS / "rbac"
NAMESPACED_RBAC_TEMPLATE: Final = RBAC / "namespaced.yaml.j2"
# The first Kubernetes version whose API server evaluates CRD validation rules (CEL).
CEL_MIN_VERSION: Final = (1, 25)
CEL_FIELD: Final = "x-kubernetes-validations"

Doc = dict[str, Any]


def _documents(path: Path) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(path.read_text("utf-8")) if doc]


def parse_server_version(info: Mapping[str, Any]) -> tuple[int, int]:
    """(major, minor) from the API server's ``/version`` answer (``"20+"`` reads as 20)."""
    numbers: list[int] = []
    for key in ("major", "minor"):
        match = re.match(r"\d+", str(info.get(key) or ""))
        if match is None:
            raise ValueError(f"API server /version has no numeric {key}: {dict(info)!r}")
        numbers.append(int(match.group()))
    return numbers[0], numbers[1]


def supports_cel(version: tuple[int, int]) -> bool:
    return version >= CEL_MIN_VERSION


def without_cel(value: Any) -> Any:
    """A copy of ``value`` with every ``x-kubernetes-validations`` removed, at any depth."""
    if isinstance(value, Mapping):
        return {k: without_cel(v) for k, v in value.items() if k != CEL_FIELD}
    if isinstance(value, list):
        return [without_cel(v) for v in value]
    return copy.deepcopy(value)


def crd_documents(version: tuple[int, int], folder: Path = CRDS) -> list[Doc]:
    """Every CRD in ``folder`` (ours by default), fit for an API server of ``version``."""
    docs = [doc for path in sorted(folder.glob("*.yaml")) for doc in _documents(path)]
    return docs if supports_cel(version) else [without_cel(doc) for doc in docs]


def cluster_role_documents(folder: Path = RBAC) -> list[Doc]:
    """The ClusterRoles we ship: the controller's and the ``maas-api`` one it binds."""
    docs = [doc for path in sorted(folder.glob("*.yaml")) for doc in _documents(path)]
    return [doc for doc in docs if doc.get("kind") == "ClusterRole"]


@cache
def _namespaced_template() -> jinja2.Template:
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
    )
    # A JSON string is a valid YAML scalar: no value can break the document's structure.
    env.filters["q"] = lambda value: json.dumps(str(value))
    return env.from_string(NAMESPACED_RBAC_TEMPLATE.read_text("utf-8"))


def render_namespaced_rbac(
    *,
    prefix: str,
    controller_namespace: str,
    infra_namespace: str,
    service_account: str,
    service_account_namespace: str,
    labels: Mapping[str, str] | None = None,
) -> list[Doc]:
    """Role + RoleBinding ``<prefix>-leader-election`` in the controller namespace and
    ``<prefix>-platform`` in the infra namespace, bound to the controller's service account."""
    values = {
        "prefix": prefix,
        "controller_namespace": controller_namespace,
        "infra_namespace": infra_namespace,
        "service_account": service_account,
        "service_account_namespace": service_account_namespace,
    }
    for key, value in values.items():
        if not value:
            raise ValueError(f"{key} is required")
    rendered = _namespaced_template().render(
        **values, labels=dict(labels or {}), lease_name=contract.LEASE_NAME
    )
    return _documents_from(rendered)


def _documents_from(text: str) -> list[Doc]:
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    for doc in docs:
        if not isinstance(doc, dict):
            raise ValueError(f"{NAMESPACED_RBAC_TEMPLATE.name} rendered a non-mapping document")
    return docs
