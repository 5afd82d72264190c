"""Render one tenant's maas-api platform: ``PlatformContext`` → objects. Pure, no I/O.

Each object comes from a Jinja2 template in ``aitenant/templates`` (docs/differences.md D5).
Values reach the YAML only through the ``to_json`` filter, so a tenant name or an image reference
can never change the document's structure. After parsing, every object gets the common labels and
the tenant tracking labels (docs/platform.md), and every name is checked against its kind's limit
(63, or 52 for CronJobs, whose Jobs append 11 characters).

The default tenant (``models-as-a-service``) keeps the unsuffixed legacy names; every other
tenant's names end in ``-<tenant>`` (docs/contract.md §3.1). The CronJob name is bounded with the
hash rule of docs/contract.md §3.1, so it fits for every valid tenant name.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from aitenant import certificates, contract, naming
from aitenant.certificates import ServingCert
from aitenant.platform import kinds, routes

if TYPE_CHECKING:
    import jinja2

TEMPLATES: Final = Path(__file__).resolve().parent.parent / "templates"
NAME_MAX: Final = 63
CRONJOB_NAME_MAX: Final = 52
DEFAULT_MAX_EXPIRATION_DAYS: Final = 90
MAAS_API_PORT: Final = 8443
# How long a stopping maas-api pod keeps serving before it is told to stop: the Service's
# endpoints and every Gateway drop it meanwhile, so a pod replaced by a rollout (a renewed
# certificate) takes no request down with it (docs/platform.md §1, docs/differences.md D38).
MAAS_API_DRAIN_SECONDS: Final = 5
# Request paths the TokenRateLimitPolicy leaves to the maas-api route; everything else on the
# Gateway is denied by default. What the route itself matches is ``routes.PUBLIC_PATHS``.
ROUTE_PREFIXES: Final = ("/v1/models", "/v1/subscriptions", "/v1/api-keys")
API_PREFIX: Final = routes.API_PREFIX
SHARED_CLUSTER_ROLE: Final = "maas-api"

# libyaml's safe loader when PyYAML has it: parsing is most of a render's cost otherwise.
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class RenderError(ValueError):
    """The context cannot produce valid objects (e.g. a name over its kind's limit)."""


@dataclass(frozen=True)
class Telemetry:
    """The dimensions of the tenant's usage metrics (``MaasTenantConfig.spec.telemetry.metrics``)
    with the contract's defaults (docs/contract.md §3.6). User identity is personal data: off
    unless asked for."""

    organization: bool = True
    user: bool = False
    group: bool = False
    model_usage: bool = True


# Metric label → CEL expression (the subscription and its cost
# centre always; the rest under the switches above).
TELEMETRY_SUBSCRIPTION: Final = "auth.identity.selected_subscription"
TELEMETRY_COST_CENTER: Final = (
    "has(auth.identity.subscription_info.costCenter) ? "
    'auth.identity.subscription_info.costCenter : ""'
)
TELEMETRY_ORGANIZATION: Final = (
    "has(auth.identity.subscription_info.organizationId) ? "
    'auth.identity.subscription_info.organizationId : ""'
)
TELEMETRY_USER: Final = "auth.identity.userid"
TELEMETRY_GROUP: Final = "auth.identity.groups_str"
TELEMETRY_MODEL: Final = 'responseBodyJSON("/model")'


def telemetry_labels(telemetry: Telemetry) -> dict[str, str]:
    labels = {"subscription": TELEMETRY_SUBSCRIPTION, "cost_center": TELEMETRY_COST_CENTER}
    if telemetry.organization:
        labels["organization_id"] = TELEMETRY_ORGANIZATION
    if telemetry.user:
        labels["user"] = TELEMETRY_USER
    if telemetry.group:
        labels["group"] = TELEMETRY_GROUP
    if telemetry.model_usage:
        labels["model"] = TELEMETRY_MODEL
    return labels


@dataclass(frozen=True)
class PlatformContext:
    """Everything one tenant's platform is rendered from."""

    tenant: str  # the AITenant name; models-as-a-service for the default tenant
    tenant_namespace: str
    aitenant_namespace: str
    infra_namespace: str
    gateway_namespace: str
    gateway_name: str
    default_gateway_name: str  # --gateway-name
    controller_namespace: str
    image: str
    cleanup_image: str
    replicas: int
    serving_cert: ServingCert
    max_expiration_days: int = DEFAULT_MAX_EXPIRATION_DAYS
    telemetry: Telemetry | None = None  # None: no TelemetryPolicy
    # The CA (PEM) the Gateway trusts for TLS to maas-api, the one that signs its serving
    # certificate; None: no BackendTLSPolicy (the API server does not serve the kind).
    backend_ca_pem: str | None = None
    authorino_namespaces: tuple[str, ...] = contract.DEFAULT_AUTHORINO_NAMESPACES
    # Labels of the pods admitted from the controller's and the gateway's namespace, as
    # (key, value) pairs; () admits every pod there (docs/differences.md D37). A value
    # ``{gateway}`` stands for ``gateway_name``.
    controller_pod_labels: tuple[tuple[str, str], ...] = ()
    gateway_pod_labels: tuple[tuple[str, str], ...] = contract.DEFAULT_GATEWAY_POD_LABELS

    @property
    def is_default(self) -> bool:
        return self.tenant == contract.DEFAULT_TENANT_NAME


@dataclass(frozen=True)
class PlatformNames:
    api: str  # ServiceAccount, Deployment, Service, NetworkPolicy, ClusterRoleBinding
    serving_cert: str
    route: str
    cleanup: str  # the CronJob
    # The cleanup pods' tenant-instance label and their NetworkPolicy: a prefix no ``api``
    # name can have, so no tenant's name makes it another tenant's (docs/platform.md §13).
    cleanup_instance: str
    rate_limit: str
    telemetry: str
    backend_ca: str  # the ConfigMap of the BackendTLSPolicy (named like the Service)
    gateway_auth: str | None  # None: the tenant must not touch the Gateway's AuthPolicy
    # The Role and RoleBinding that let ``api`` read the database Secret in its namespace.
    db_secret_role: str


def names_for(tenant: str, gateway_name: str, default_gateway_name: str) -> PlatformNames:
    suffix = naming.tenant_suffix(tenant)
    is_default = not suffix
    gateway_auth: str | None = naming.gateway_auth_policy_name(tenant, gateway_name)
    if not is_default and gateway_name == default_gateway_name:
        # A non-default tenant on the default Gateway leaves maas-gateway-auth alone.
        gateway_auth = None
    return PlatformNames(
        api=f"maas-api{suffix}",
        serving_cert=f"maas-api{suffix}-serving-cert",
        route=f"maas-api-route{suffix}",
        cleanup=(
            "maas-api-key-cleanup"
            if is_default
            else naming.bounded_name("maas-api-key-cleanup-", tenant, "", CRONJOB_NAME_MAX)
        ),
        cleanup_instance=f"maas-key-cleanup{suffix}",
        rate_limit=f"gateway-default-deny{suffix}",
        telemetry=f"maas-telemetry{suffix}",
        backend_ca=f"maas-api{suffix}-backend-ca",
        gateway_auth=gateway_auth,
        db_secret_role=f"maas-api{suffix}-db-secret",
    )


def tracking_labels(tenant: str, tenant_namespace: str) -> dict[str, str]:
    """The prune selector: every platform object of one tenant, and nothing else."""
    return {
        contract.LABEL_MANAGED_BY: contract.PLATFORM_MANAGED_BY_VALUE,
        contract.LABEL_TENANT_NAME: tenant,
        contract.LABEL_TENANT_NAMESPACE: tenant_namespace,
    }


def common_labels(ctx: PlatformContext) -> dict[str, str]:
    return {
        contract.LABEL_APP_NAME: "maas-api",
        contract.LABEL_COMPONENT: "api",
        contract.LABEL_PART_OF: contract.PLATFORM_PART_OF_VALUE,
        **tracking_labels(ctx.tenant, ctx.tenant_namespace),
    }


@dataclass(frozen=True)
class Manifest:
    """One rendered object; ``create_only`` objects are created when missing, never updated."""

    obj: dict[str, Any]
    create_only: bool = False

    @property
    def kind(self) -> kinds.Kind:
        return kinds.kind_of(self.obj)

    @property
    def name(self) -> str:
        return self.obj["metadata"]["name"]

    @property
    def namespace(self) -> str | None:
        return self.obj["metadata"].get("namespace")

    @property
    def ref(self) -> Ref:
        return ref_of(self.obj)

    def __str__(self) -> str:
        ns = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind.kind} {ns}{self.name}"


# (group, kind, namespace, name): the identity of an object whatever API version serves it.
Ref = tuple[str, str, str, str]


def ref_of(obj: dict[str, Any]) -> Ref:
    group = obj["apiVersion"].rpartition("/")[0]
    meta = obj["metadata"]
    return (group, obj["kind"], meta.get("namespace") or "", meta["name"])


@functools.cache
def _environment() -> jinja2.Environment:
    import jinja2  # on the first render, not at process start (its import is slow)

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )

    @jinja2.pass_context
    def to_json(context: jinja2.runtime.Context, value: Any) -> str:
        slots: list[Any] | None = context.get(SLOTS)
        if slots is None:
            return json.dumps(value)
        slots.append(value)
        return json.dumps(f"{SLOT_MARK}{len(slots) - 1}@@")

    env.filters["to_json"] = to_json
    return env


# How a render avoids parsing YAML for every tenant. Values enter a template only through
# ``to_json``, as whole scalars (or whole maps and lists), so the text of a template rendered
# with a numbered marker in place of each value is the same for every tenant whose template
# takes the same branches: its "shape". Each shape is parsed once; the markers in the parsed
# shape are then replaced by the values (never searched themselves, so a value may hold any
# text). A marker inside a longer string (a template that pastes a value into other text)
# falls back to parsing the real text; the unit tests check both ways give the same objects.
SLOTS: Final = "__aitenant_slots"
SLOT_MARK: Final = "@@aitenant-slot-"
_SLOT: Final = re.compile(r"@@aitenant-slot-(\d+)@@")
SHAPE_CACHE_SIZE: Final = 64


class _EmbeddedValue(Exception):
    """A value's marker is part of a longer string: the shape cannot be filled in."""


@functools.lru_cache(maxsize=SHAPE_CACHE_SIZE)
def _parsed_shape(text: str) -> tuple[Any, ...]:
    """The documents of a shape; shared between renders, so never changed (``_fill`` copies)."""
    return tuple(parse_documents(text))


def _fill(node: Any, slots: list[Any]) -> Any:
    if isinstance(node, str):
        if SLOT_MARK not in node:
            return node
        if (match := _SLOT.fullmatch(node)) is None:
            raise _EmbeddedValue
        return slots[int(match.group(1))]
    if isinstance(node, dict):
        return {_fill(k, slots): _fill(v, slots) for k, v in node.items()}
    if isinstance(node, list):
        return [_fill(v, slots) for v in node]
    return node


def documents(template: jinja2.Template, variables: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-empty documents ``template`` renders to with ``variables``."""
    slots: list[Any] = []
    shape = template.render({**variables, SLOTS: slots})
    try:
        return [_fill(doc, slots) for doc in _parsed_shape(shape)]
    except _EmbeddedValue:
        return parse_documents(template.render(variables))


def parse_documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.load_all(text, Loader=SAFE_LOADER) if doc]


# No route-level AuthPolicy for maas-api: one would override, for that route, the defaults of
# the Gateway AuthPolicy that the MaaSAuthPolicy controller fills (identity, the X-MaaS-*
# headers, the subscription), so maas-api would see an empty subscription. A copy left by an
# older version is pruned like any object no longer rendered.
# Template file → whether its object is create-only. Order is apply order: the Secret and the
# ServiceAccount exist before the Deployment that mounts and runs as them, the database Secret's
# Role before its RoleBinding (apply.py applies them in waves).
TEMPLATE_FILES: Final = (
    ("serviceaccount.yaml.j2", False),
    ("db-secret-role.yaml.j2", False),
    ("serving-cert-secret.yaml.j2", False),
    ("deployment.yaml.j2", False),
    ("service.yaml.j2", False),
    ("networkpolicy.yaml.j2", False),
    ("networkpolicy-cleanup.yaml.j2", False),
    ("clusterrolebinding.yaml.j2", False),
    ("httproute.yaml.j2", False),
    ("backend-ca-configmap.yaml.j2", False),
    ("backendtlspolicy.yaml.j2", False),
    ("cronjob.yaml.j2", False),
    ("tokenratelimitpolicy.yaml.j2", False),
    ("gateway-authpolicy.yaml.j2", True),
    ("telemetrypolicy.yaml.j2", False),
)


def template_variables(ctx: PlatformContext) -> dict[str, Any]:
    names = names_for(ctx.tenant, ctx.gateway_name, ctx.default_gateway_name)
    selector = {
        contract.LABEL_APP_NAME: "maas-api",
        contract.LABEL_TENANT_INSTANCE: names.api,
    }
    infra = ctx.infra_namespace
    return {
        "ctx": ctx,
        "names": names,
        "selector": selector,
        "pod_labels": {**common_labels(ctx), **selector},
        "cleanup_selector": {contract.LABEL_TENANT_INSTANCE: names.cleanup_instance},
        "telemetry_labels": telemetry_labels(ctx.telemetry) if ctx.telemetry else {},
        "cleanup_pod_labels": {
            **common_labels(ctx),
            contract.LABEL_APP_NAME: "maas-api-cleanup",
            contract.LABEL_COMPONENT: "cleanup",
            contract.LABEL_TENANT_INSTANCE: names.cleanup_instance,
        },
        "controller_pods": dict(ctx.controller_pod_labels),
        "gateway_pods": gateway_pods(ctx),
        "cert_annotation": contract.ANNOTATION_SERVING_CERT_SHA256,
        "port": MAAS_API_PORT,
        "drain_seconds": MAAS_API_DRAIN_SECONDS,
        "bare_matches": routes.bare_matches(),
        "prefixed_rules": routes.prefixed_rules(),
        "gateway_prefixes": (API_PREFIX, *ROUTE_PREFIXES),
        "cluster_role": SHARED_CLUSTER_ROLE,
        # Fixed in maas-api (settings.py refuses any other --maas-api-db-secret).
        "db_secret": contract.MAAS_API_DB_SECRET,
        # The serving certificate's first name (platform/certificates.py): what the Gateway checks.
        "backend_hostname": certificates.dns_names(names.api, infra)[0],
        "ca_key": certificates.CA_CERT_KEY,
        "internal_url": f"https://{names.api}.{infra}.svc.cluster.local:{MAAS_API_PORT}",
        "cleanup_url": (
            f"https://{names.api}.{infra}.svc:{MAAS_API_PORT}/internal/v1/api-keys/cleanup"
        ),
    }


def gateway_pods(ctx: PlatformContext) -> dict[str, str]:
    """The labels of the tenant's Gateway's pods, ``{gateway}`` filled in."""
    return {
        key: ctx.gateway_name if value == contract.GATEWAY_PLACEHOLDER else value
        for key, value in ctx.gateway_pod_labels
    }


# Renders kept, most recently used first: a tenant's config is reconciled several times while
# it comes up (its own status, then its Deployment's), each time with the same inputs. A kept
# render costs a JSON decode. Bounded, so a controller with many tenants keeps a few MB at most
# (docs/design.md §9.3).
RENDER_CACHE_SIZE: Final = 128


def render(ctx: PlatformContext) -> list[Manifest]:
    """The tenant's objects in apply order; RenderError if any would be invalid. Each call
    returns fresh objects: callers may change them."""
    return [Manifest(json.loads(obj), create_only=only) for obj, only in _render_json(ctx)]


@functools.lru_cache(maxsize=RENDER_CACHE_SIZE)
def _render_json(ctx: PlatformContext) -> tuple[tuple[str, bool], ...]:
    variables = template_variables(ctx)
    labels = common_labels(ctx)
    rendered: list[tuple[str, bool]] = []
    for filename, create_only in TEMPLATE_FILES:
        for doc in documents(_environment().get_template(filename), variables):
            meta = doc.setdefault("metadata", {})
            # Kept by `juju remove-application` (contract.KEPT_BY_JUJU_LABELS): the controller
            # runs as the charm's ServiceAccount, whose writes Juju's webhook marks otherwise
            # (docs/design.md §7.1).
            meta["labels"] = {
                **labels,
                **(meta.get("labels") or {}),
                **contract.KEPT_BY_JUJU_LABELS,
            }
            manifest = Manifest(doc, create_only=create_only)
            check_name(manifest)
            rendered.append((json.dumps(doc, separators=(",", ":")), create_only))
    return tuple(rendered)


def name_limit(kind: kinds.Kind) -> int:
    return CRONJOB_NAME_MAX if kind.kind == "CronJob" else NAME_MAX


def check_name(manifest: Manifest) -> None:
    name, limit = manifest.name, name_limit(manifest.kind)
    if len(name) > limit:
        raise RenderError(
            f'{manifest.kind.kind} name "{name}" is {len(name)} characters; the limit is {limit}'
        )
    if errors := naming.dns1123_label_errors(name):
        raise RenderError(f'{manifest.kind.kind} name "{name}" is invalid: {"; ".join(errors)}')
