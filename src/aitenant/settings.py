"""Controller settings: one frozen msgspec struct, parsed once from flags and environment.

Every flag also reads an environment variable named after it in upper snake case
(``--deletion-timeout`` → ``DELETION_TIMEOUT``); a flag given on the command line wins.
Invalid values stop the process at start with one line naming the flag (``SettingsError``).
"""

from __future__ import annotations

import argparse
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import Meta
from msgspec.structs import force_setattr

from aitenant import contract

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# Kubernetes label syntax: a value, or a key's name part (after an optional DNS-subdomain
# prefix and "/"); each at most 63 characters.
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
URL_PLACEHOLDERS = frozenset({"service", "namespace", "tenant"})
DEFAULT_MAAS_API_URL_TEMPLATE = (
    "https://{service}.{namespace}.svc:8443/internal/v1/tenants/{tenant}/api-keys"
)


class SettingsError(ValueError):
    """A flag or environment variable has an invalid value; the message names the flag."""


def parse_duration(text: str) -> float:
    """Parse a Go duration (``30s``, ``10m``, ``1h30m``, ``0``) into seconds."""
    value = text.strip()
    if value in ("0", "+0", "-0"):
        return 0.0
    sign = 1.0
    if value[:1] in ("+", "-"):
        sign = -1.0 if value[0] == "-" else 1.0
        value = value[1:]
    if not value:
        raise ValueError(f"invalid duration {text!r}")
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(value):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(value):
        raise ValueError(f"invalid duration {text!r} (use Go syntax such as 30s, 10m, 1h)")
    return sign * total


def format_duration(seconds: float) -> str:
    """Format seconds like Go's ``time.Duration.String()`` for whole seconds (``10m0s``)."""
    whole = round(seconds)
    if whole == 0:
        return "0s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def _field_error(field: str, reason: str) -> ValueError:
    # A rule checked after conversion names its field first ("<field>: <reason>"), the one
    # place load_settings can read it back from: msgspec gives such errors no path.
    return ValueError(f"{field}: {reason}")


Port = Annotated[int, Meta(ge=0, le=65535)]
Seconds = Annotated[float, Meta(gt=0)]


class Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the controller process was told to do. Field names are the flags in snake case.

    Types and ranges are checked when ``load_settings`` converts the flags; the rules
    across values (``__post_init__``) run on every construction.
    """

    aitenant_namespace: str = contract.DEFAULT_AITENANT_NAMESPACE
    gateway_namespace: str = "openshift-ingress"
    gateway_name: str = contract.DEFAULT_GATEWAY_NAME
    maas_subscription_namespace: str = contract.DEFAULT_SUBSCRIPTION_NAMESPACE
    controller_namespace: str = "default"
    infra_namespace: str = ""
    enable_tenant_namespace_discovery: bool = False
    deletion_timeout: Annotated[float, Meta(ge=0)] = 600.0
    subscription_namespace_maintain_interval: Seconds = 30.0
    manage_default_tenant: bool = True
    maas_api_url_template: str = DEFAULT_MAAS_API_URL_TEMPLATE
    maas_api_ca_file: Path | None = None
    maas_api_ca_key_file: Path | None = None
    maas_api_via_cluster_ip: bool = False
    maas_api_image: str = "quay.io/opendatahub/maas-api:latest"
    maas_api_cleanup_image: str = "docker.io/curlimages/curl:8.11.1"
    maas_api_db_secret: str = contract.MAAS_API_DB_SECRET
    maas_api_replicas: Annotated[
        int, Meta(ge=contract.MAAS_API_REPLICAS_MIN, le=contract.MAAS_API_REPLICAS_MAX)
    ] = 1
    maas_api_max_replicas: Annotated[
        int, Meta(ge=contract.MAAS_API_REPLICAS_MIN, le=contract.MAAS_API_REPLICAS_MAX)
    ] = contract.DEFAULT_MAAS_API_MAX_REPLICAS
    authorino_namespaces: tuple[str, ...] = contract.DEFAULT_AUTHORINO_NAMESPACES
    # Label selectors (key=value[,key=value]) of the pods that may reach maas-api from the
    # controller's namespace and from the gateway namespace; "" admits that namespace's every
    # pod (docs/differences.md D37).
    controller_pod_selector: str = ""
    gateway_pod_selector: str = contract.DEFAULT_GATEWAY_POD_SELECTOR
    webhook_port: Port = contract.DEFAULT_WEBHOOK_PORT
    webhook_cert_dir: Path | None = None
    metrics_port: Port = contract.DEFAULT_METRICS_PORT
    health_port: Port = contract.DEFAULT_HEALTH_PORT
    bind_address: str = "0.0.0.0"
    leader_elect: bool = False
    leader_elect_lease_duration: Seconds = 15.0
    leader_elect_renew_deadline: Seconds = 10.0
    leader_elect_retry_period: Seconds = 2.0
    kubeconfig: Path | None = None
    log_level: str = "info"
    workers: Annotated[int, Meta(ge=1, le=256)] = 8

    def __post_init__(self) -> None:
        for field in _NON_BLANK:
            value: str = getattr(self, field).strip()
            if not value:
                raise _field_error(field, "must be non-empty")
            force_setattr(self, field, value)
        if self.infra_namespace and not self.infra_namespace.strip():
            raise _field_error("infra_namespace", "must not be whitespace only")
        force_setattr(
            self, "authorino_namespaces", _authorino_namespaces(self.authorino_namespaces)
        )
        _check_url_template(self.maas_api_url_template)
        for field, placeholders in (
            ("controller_pod_selector", ()),
            ("gateway_pod_selector", (contract.GATEWAY_PLACEHOLDER,)),
        ):
            try:
                pairs = parse_pod_selector(getattr(self, field), placeholders)
            except ValueError as exc:
                raise _field_error(field, str(exc)) from None
            force_setattr(self, field, format_pod_selector(pairs))
        if self.maas_api_db_secret != contract.MAAS_API_DB_SECRET:
            # Accepting another name would leave a tenant Active whose maas-api reads a Secret
            # the operator never meant (docs/platform.md §1).
            raise _field_error(
                "maas_api_db_secret",
                f'"{self.maas_api_db_secret}": maas-api reads its database URL only from the '
                f"Secret {contract.MAAS_API_DB_SECRET} in its namespace; leave it unset or set "
                f"{contract.MAAS_API_DB_SECRET}",
            )
        if self.maas_api_replicas > self.maas_api_max_replicas:
            # The default count is what a tenant gets when its annotation is refused, so it
            # must keep within the ceiling too (docs/differences.md D35).
            raise _field_error(
                "maas_api_replicas",
                f"{self.maas_api_replicas} exceeds --maas-api-max-replicas "
                f"{self.maas_api_max_replicas}",
            )
        level = self.log_level.lower()
        if level not in _LOG_LEVELS:
            raise _field_error("log_level", f"must be one of {', '.join(_LOG_LEVELS)}")
        force_setattr(self, "log_level", level)
        if not (
            self.leader_elect_retry_period
            < self.leader_elect_renew_deadline
            < self.leader_elect_lease_duration
        ):
            raise _field_error(
                "leader_elect_lease_duration",
                "need retry period < renew deadline < lease duration",
            )

    @property
    def controller_pods(self) -> tuple[tuple[str, str], ...]:
        """``--controller-pod-selector`` as (key, value) pairs; () admits every pod."""
        return parse_pod_selector(self.controller_pod_selector)

    @property
    def gateway_pods(self) -> tuple[tuple[str, str], ...]:
        """``--gateway-pod-selector`` as (key, value) pairs, ``{gateway}`` kept for the
        renderer to fill; () admits every pod."""
        return parse_pod_selector(self.gateway_pod_selector, (contract.GATEWAY_PLACEHOLDER,))

    @property
    def effective_infra_namespace(self) -> str:
        """The infra namespace in use: ``--infra-namespace``, or the controller namespace when
        that is unset. Where maas-api runs and the gateway selector labels go."""
        return self.infra_namespace or self.controller_namespace

    def maas_api_url(self, tenant: str) -> str:
        service = "maas-api" if tenant == contract.DEFAULT_TENANT_NAME else f"maas-api-{tenant}"
        return self.maas_api_url_template.format(
            service=service, namespace=self.effective_infra_namespace, tenant=tenant
        )


_NON_BLANK = (
    "aitenant_namespace",
    "gateway_namespace",
    "gateway_name",
    "maas_subscription_namespace",
    "controller_namespace",
)
_LOG_LEVELS = ("debug", "info", "warning", "error")


def _authorino_namespaces(value: tuple[str, ...]) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in value if n.strip()))
    if not names:
        raise _field_error(
            "authorino_namespaces", "must name at least one namespace (comma-separated)"
        )
    for name in names:
        if len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
            raise _field_error(
                "authorino_namespaces",
                f'"{name}" is not a namespace name (lower-case letters, digits and "-", '
                "at most 63 characters)",
            )
    return names


def parse_pod_selector(
    text: str, placeholders: tuple[str, ...] = ()
) -> tuple[tuple[str, str], ...]:
    """``key=value[,key=value]`` as (key, value) pairs, or ValueError naming the bad part.

    Keys and values follow Kubernetes' label syntax, since the API server refuses a
    NetworkPolicy with any other and the tenant's maas-api would then never be reconciled; a
    value may also be exactly one of ``placeholders``. Empty parts are ignored.
    """
    pairs: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = (s.strip() for s in part.partition("="))
        if not sep:
            raise ValueError(f'"{part}" is not key=value')
        if not _label_key_ok(key):
            raise ValueError(f'"{key}" is not a label key')
        if value not in placeholders and not _label_value_ok(value):
            raise ValueError(f'"{value}" is not a label value')
        if key in pairs:
            raise ValueError(f'"{key}" is given twice')
        pairs[key] = value
    return tuple(pairs.items())


def format_pod_selector(pairs: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{key}={value}" for key, value in pairs)


def _label_value_ok(value: str) -> bool:
    return not value or (len(value) <= 63 and bool(_LABEL_NAME.fullmatch(value)))


def _label_key_ok(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and not (len(prefix) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return False
    return bool(name) and _label_value_ok(name)


def _check_url_template(value: str) -> None:
    fields = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
    unknown = fields - URL_PLACEHOLDERS
    if unknown:
        raise _field_error(
            "maas_api_url_template",
            f"unknown placeholder(s) {sorted(unknown)}; allowed: {sorted(URL_PLACEHOLDERS)}",
        )


@dataclass(frozen=True)
class _Flag:
    field: str
    kind: str  # "str" | "bool" | "int" | "duration" | "path" | "list" (comma-separated)
    help: str

    @property
    def option(self) -> str:
        return "--" + self.field.replace("_", "-")

    @property
    def env(self) -> str:
        return self.field.upper()


FLAGS: tuple[_Flag, ...] = (
    _Flag("aitenant_namespace", "str", "the only namespace where AITenants are accepted"),
    _Flag("gateway_namespace", "str", "namespace of every tenant Gateway"),
    _Flag("gateway_name", "str", "the default tenant's Gateway name"),
    _Flag("maas_subscription_namespace", "str", "tenant namespace of the default tenant"),
    _Flag("controller_namespace", "str", "namespace of the controller (default POD_NAMESPACE)"),
    _Flag("infra_namespace", "str", "infra namespace (default: the controller namespace)"),
    _Flag("enable_tenant_namespace_discovery", "bool", "serve configs in labelled namespaces"),
    _Flag("deletion_timeout", "duration", "force cleanup after this long; 0 disables"),
    _Flag("subscription_namespace_maintain_interval", "duration", "namespace monitor period"),
    _Flag("manage_default_tenant", "bool", "create Config/default and the default tenant"),
    _Flag("maas_api_url_template", "str", "URL of maas-api's tenant API-key endpoint"),
    _Flag("maas_api_ca_file", "path", "CA certificate that signs maas-api serving certs"),
    _Flag("maas_api_ca_key_file", "path", "key of that CA"),
    _Flag("maas_api_via_cluster_ip", "bool", "call maas-api at its Service's ClusterIP"),
    _Flag("maas_api_image", "str", "maas-api image"),
    _Flag("maas_api_cleanup_image", "str", "image with curl for the key-cleanup CronJob"),
    _Flag("maas_api_db_secret", "str", "Secret holding maas-api's DB_CONNECTION_URL"),
    _Flag("maas_api_replicas", "int", "maas-api replicas per tenant"),
    _Flag("maas_api_max_replicas", "int", "most maas-api replicas a tenant's config may ask"),
    _Flag("authorino_namespaces", "list", "namespaces whose Authorino may reach maas-api"),
    _Flag("controller_pod_selector", "str", "labels of the controller's pods (key=value,...)"),
    _Flag("gateway_pod_selector", "str", "labels of a Gateway's pods; {gateway}: its name"),
    _Flag("webhook_port", "int", "HTTPS port of the admission webhook; 0 disables"),
    _Flag("webhook_cert_dir", "path", "directory with tls.crt and tls.key for the webhook"),
    _Flag("metrics_port", "int", "port of /metrics; 0 disables"),
    _Flag("health_port", "int", "port of /healthz and /readyz; 0 disables"),
    _Flag("bind_address", "str", "address the HTTP servers listen on"),
    _Flag("leader_elect", "bool", "elect a leader through a Lease before reconciling"),
    _Flag("leader_elect_lease_duration", "duration", "how long a Lease is valid unrenewed"),
    _Flag("leader_elect_renew_deadline", "duration", "leader gives up if not renewed by then"),
    _Flag("leader_elect_retry_period", "duration", "how often candidates and leader try"),
    _Flag("kubeconfig", "path", "kubeconfig file (default: in-cluster, then ~/.kube/config)"),
    _Flag("log_level", "str", "debug, info, warning or error"),
    _Flag("workers", "int", "concurrent reconciles per controller"),
)

# The deletion timeout's other variable name, accepted as an alias (docs/contract.md §1.2).
_ENV_ALIASES = {"deletion_timeout": ("AITENANT_DELETION_TIMEOUT",)}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _convert(flag: _Flag, raw: str) -> Any:
    if flag.kind == "bool":
        low = raw.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError(f"invalid boolean {raw!r}")
    if flag.kind == "int":
        return int(raw)
    if flag.kind == "duration":
        return parse_duration(raw)
    if flag.kind == "path":
        return Path(raw) if raw else None
    if flag.kind == "list":
        return tuple(raw.split(","))
    return raw


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aitenant-controller",
        description="AITenant controller and admission webhook",
        argument_default=argparse.SUPPRESS,
    )
    for flag in FLAGS:
        if flag.kind == "bool":
            # Go-style: bare flag means true; --flag=false is accepted too.
            parser.add_argument(
                flag.option, nargs="?", const="true", help=f"{flag.help} [{flag.env}]"
            )
        else:
            parser.add_argument(flag.option, help=f"{flag.help} [{flag.env}]")
    return parser


def load_settings(argv: Sequence[str], environ: Mapping[str, str]) -> Settings:
    """Build Settings from the command line and the environment, or raise SettingsError."""
    args = vars(_parser().parse_args(list(argv)))
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    for flag in FLAGS:
        raw: str | None = args.get(flag.field)
        origin = flag.option
        if raw is None:
            for name in (flag.env, *_ENV_ALIASES.get(flag.field, ())):
                if name in environ:
                    raw, origin = environ[name], f"{flag.option} (from ${name})"
                    break
        if raw is None:
            continue
        try:
            values[flag.field] = _convert(flag, raw)
        except ValueError as exc:
            raise SettingsError(f"invalid value for {origin}: {exc}") from None
        source[flag.field] = origin
    if "controller_namespace" not in values and environ.get("POD_NAMESPACE"):
        values["controller_namespace"] = environ["POD_NAMESPACE"]
        source["controller_namespace"] = "--controller-namespace (from $POD_NAMESPACE)"
    try:
        return msgspec.convert(values, Settings)
    except msgspec.ValidationError as exc:
        field, msg = _failed_field(str(exc))
        origin = source.get(field, "--" + field.replace("_", "-"))
        raise SettingsError(f"invalid value for {origin}: {msg}") from None


def _failed_field(message: str) -> tuple[str, str]:
    """Split msgspec's error into the field and the reason.

    A type or range error ends with its path (``Expected `int` >= 1 - at `$.workers```);
    a rule of ``__post_init__`` starts with its field (``workers: ...``).
    """
    reason, sep, path = message.rpartition(" - at `$.")
    if sep:
        return path.rstrip("`"), reason[:1].lower() + reason[1:]
    field, _, reason = message.partition(": ")
    return field, reason
