"""The charm's ``juju config`` options, parsed once into a typed, validated model.

Option names are the controller's flags in kebab-case (``deletion-timeout`` →
``--deletion-timeout``); ``ops.CharmBase.load_config`` maps them onto the snake_case fields.
A bad value never falls back silently: :func:`describe_error` turns the validation error into
the option name and a reason, which the status ladder shows as ``BlockedStatus``.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from aitenant import contract
from aitenant.settings import format_pod_selector, parse_duration, parse_pod_selector

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

LogLevel = Literal["debug", "info", "warning", "error"]


def option_name(field: str) -> str:
    """The Juju option of a model field (``deletion_timeout`` → ``deletion-timeout``)."""
    return field.replace("_", "-")


class CharmConfig(BaseModel):
    """Validated charm configuration. Defaults mirror ``charmcraft.yaml``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    aitenant_namespace: str = contract.DEFAULT_AITENANT_NAMESPACE
    enable_tenant_namespace_discovery: bool = True
    gateway_namespace: str = ""
    gateway_name: str = ""
    infra_namespace: str = ""
    maas_subscription_namespace: str = contract.DEFAULT_SUBSCRIPTION_NAMESPACE
    deletion_timeout: str = "10m"
    manage_default_tenant: bool = True
    authorino_namespaces: str = ",".join(contract.DEFAULT_AUTHORINO_NAMESPACES)
    gateway_pod_selector: str = contract.DEFAULT_GATEWAY_POD_SELECTOR
    maas_api_max_replicas: int = contract.DEFAULT_MAAS_API_MAX_REPLICAS
    log_level: LogLevel = "info"

    @field_validator("maas_api_max_replicas")
    @classmethod
    def _replica_ceiling(cls, value: int) -> int:
        low, high = contract.MAAS_API_REPLICAS_MIN, contract.MAAS_API_REPLICAS_MAX
        if not low <= value <= high:
            raise ValueError(f"{value} is not from {low} to {high}")
        return value

    @field_validator("aitenant_namespace", "maas_subscription_namespace")
    @classmethod
    def _required_namespace(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must be non-empty")
        return _namespace(value)

    @field_validator("gateway_namespace", "infra_namespace")
    @classmethod
    def _optional_namespace(cls, value: str) -> str:
        value = value.strip()
        return _namespace(value) if value else ""

    @field_validator("gateway_name")
    @classmethod
    def _gateway_name(cls, value: str) -> str:
        # The default tenant's AITenant takes it as spec.gateway.name, which its CRD bounds to
        # a DNS-1123 label: a longer or dotted name would be refused there on every retry.
        value = value.strip()
        if value and (len(value) > 63 or not _DNS_LABEL.match(value)):
            raise ValueError(
                f"{value!r} is not a valid Gateway name for an AITenant (DNS-1123 label: "
                "lower-case letters, digits and '-', at most 63 characters)"
            )
        return value

    @field_validator("deletion_timeout")
    @classmethod
    def _duration(cls, value: str) -> str:
        value = value.strip()
        seconds = parse_duration(value)  # ValueError names the bad text
        if seconds < 0:
            raise ValueError(f"{value!r} is negative; use 0 to disable the timeout")
        return value

    @field_validator("authorino_namespaces")
    @classmethod
    def _namespace_list(cls, value: str) -> str:
        names = list(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
        if not names:
            raise ValueError("must name at least one namespace (comma-separated)")
        for name in names:
            _namespace(name)
        return ",".join(names)

    @field_validator("gateway_pod_selector")
    @classmethod
    def _gateway_pods(cls, value: str) -> str:
        # What --gateway-pod-selector accepts; "" admits every pod of the gateway namespace.
        pairs = parse_pod_selector(value, (contract.GATEWAY_PLACEHOLDER,))
        return format_pod_selector(pairs)

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @property
    def deletion_timeout_seconds(self) -> float:
        """The deletion timeout in seconds (0 disables the forced cleanup)."""
        return parse_duration(self.deletion_timeout)


def _namespace(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(f"{value!r} is not a valid namespace name (DNS-1123 label)")
    return value


def describe_error(exc: ValidationError) -> tuple[str, str]:
    """The Juju option and a one-line reason for the first error in ``exc``."""
    first = exc.errors()[0]
    field = str(first["loc"][0]) if first["loc"] else ""
    reason = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "literal_error":
        reason = f"{first.get('input')!r} is not one of debug, info, warning, error"
    return option_name(field), reason
