"""The kinds the platform renders, as lightkube resource classes that carry plain dicts.

The classes are generic (objects stay the dicts the API server sent, the form the informers
store) and deliberately *not* registered in lightkube's global resource registry: built-in
kinds such as Deployment already have typed models there, and registering a generic class
under the same apiVersion/kind would change what ``codecs`` returns for everyone else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aitenant.runtime.client.lightkube_private import resource_class

# Served by every Kubernetes API server; the platform's other kinds come with CRDs.
BUILT_IN_GROUPS = frozenset({"", "apps", "batch", "networking.k8s.io", "rbac.authorization.k8s.io"})


@dataclass(frozen=True)
class Kind:
    """One API kind: its identity and the resource class used to talk about it."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def built_in(self) -> bool:
        """Served by every Kubernetes API server (the others come with CRDs that may be absent)."""
        return self.group in BUILT_IN_GROUPS

    @property
    def resource(self) -> Any:
        return _resource_class(self)

    def __str__(self) -> str:
        return f"{self.kind}.{self.api_version}"


_CLASSES: dict[Kind, Any] = {}


def _resource_class(kind: Kind) -> Any:
    cls = _CLASSES.get(kind)
    if cls is None:
        cls = resource_class(
            kind.group, kind.version, kind.kind, kind.plural, namespaced=kind.namespaced
        )
        _CLASSES[kind] = cls
    return cls


SERVICE_ACCOUNT = Kind("v1", "ServiceAccount", "serviceaccounts")
SERVICE = Kind("v1", "Service", "services")
SECRET = Kind("v1", "Secret", "secrets")
CONFIG_MAP = Kind("v1", "ConfigMap", "configmaps")
DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments")
NETWORK_POLICY = Kind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies")
ROLE = Kind("rbac.authorization.k8s.io/v1", "Role", "roles")
ROLE_BINDING = Kind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings")
CLUSTER_ROLE_BINDING = Kind(
    "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False
)
CRONJOB = Kind("batch/v1", "CronJob", "cronjobs")
HTTP_ROUTE = Kind("gateway.networking.k8s.io/v1", "HTTPRoute", "httproutes")
AUTH_POLICY = Kind("kuadrant.io/v1", "AuthPolicy", "authpolicies")
TOKEN_RATE_LIMIT_POLICY = Kind(
    "kuadrant.io/v1alpha1", "TokenRateLimitPolicy", "tokenratelimitpolicies"
)
TELEMETRY_POLICY = Kind("extensions.kuadrant.io/v1alpha1", "TelemetryPolicy", "telemetrypolicies")
# Gateway API v1.5.1's standard channel serves it as v1 only (its v1alpha3 is not served).
BACKEND_TLS_POLICY = Kind("gateway.networking.k8s.io/v1", "BackendTLSPolicy", "backendtlspolicies")

ALL = (
    SERVICE_ACCOUNT,
    SERVICE,
    SECRET,
    DEPLOYMENT,
    NETWORK_POLICY,
    ROLE,
    ROLE_BINDING,
    CLUSTER_ROLE_BINDING,
    CRONJOB,
    HTTP_ROUTE,
    AUTH_POLICY,
    TOKEN_RATE_LIMIT_POLICY,
    TELEMETRY_POLICY,
    CONFIG_MAP,
    BACKEND_TLS_POLICY,
)
# Kinds whose CRD a cluster may lack for good: rendered only when served, so an informer on one
# that never syncs must not hold up what is found by the tracking labels.
OPTIONAL = frozenset({TELEMETRY_POLICY, BACKEND_TLS_POLICY})
# Where a kind lives: its namespace, or None for a cluster-scoped kind.
Scope = tuple[Kind, str | None]


def platform_scopes(infra_namespace: str, gateway_namespace: str) -> list[Scope]:
    """Everywhere a tenant's platform objects can be: the informers of the platform cache, the
    lists of pruning and cleanup. The two namespaces may be one."""
    return [
        (SERVICE_ACCOUNT, infra_namespace),
        (SECRET, infra_namespace),
        (ROLE, infra_namespace),
        (ROLE_BINDING, infra_namespace),
        (DEPLOYMENT, infra_namespace),
        (SERVICE, infra_namespace),
        (NETWORK_POLICY, infra_namespace),
        (CRONJOB, infra_namespace),
        (HTTP_ROUTE, infra_namespace),
        (CONFIG_MAP, infra_namespace),
        (BACKEND_TLS_POLICY, infra_namespace),
        (AUTH_POLICY, infra_namespace),  # none rendered: route-level ones of older versions
        (TOKEN_RATE_LIMIT_POLICY, gateway_namespace),
        (AUTH_POLICY, gateway_namespace),
        (TELEMETRY_POLICY, gateway_namespace),
        (CLUSTER_ROLE_BINDING, None),
    ]


_BY_TYPE = {(k.api_version, k.kind): k for k in ALL}


def kind_of(obj: dict[str, Any]) -> Kind:
    """The Kind of a rendered or live object (KeyError for a kind the platform never renders)."""
    return _BY_TYPE[(obj["apiVersion"], obj["kind"])]
