"""The AITenant spec rules of its CRD schema, as messages that name the field and the fix.

Pure functions, shared by the admission webhook (which judges every AITenant write) and the
legacy Tenant migration (which must not copy a value into an AITenant that the AITenant's own
rules would refuse).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

_GATEWAY_NAME_RE: Final = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?)?")
# The CRD patterns use \S, which the API server evaluates with Go's ASCII-only class.
_WHITESPACE: Final = "\t\n\f\r "
_ISSUER_RE: Final = re.compile(rf"https://[^{_WHITESPACE}]+")
_GATEWAY_NAME_MAX: Final = 63
_ISSUER_MIN, _ISSUER_MAX = 9, 2048
_CLIENT_ID_MAX: Final = 256
# spec.oidc.ttl bounds (seconds); the CRDs of AITenant and of the legacy Tenant declare the
# same minimum and default (tests/unit/manifests/test_crd_bounds.py holds them together).
OIDC_TTL_MIN: Final = 30
OIDC_TTL_DEFAULT: Final = 300


def quote(value: str) -> str:
    """Quote like Go's ``%q`` for the strings that reach these messages."""
    return json.dumps(value, ensure_ascii=False)


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


Problem = tuple[tuple[str, ...], str]
"""A spec rule violation: the field path it concerns and the message."""


def _gateway_problems(spec: Mapping[str, Any], gateway_namespace: str) -> list[Problem]:
    gateway = spec.get("gateway")
    if gateway is None:
        return []
    if not isinstance(gateway, Mapping):
        return [
            (
                ("spec", "gateway"),
                f"spec.gateway must be an object with an optional name, got {json_type(gateway)}",
            )
        ]
    path = ("spec", "gateway", "name")
    name = gateway.get("name")
    hint = (
        f"set it to the name of a Gateway in namespace {quote(gateway_namespace)}, "
        "or remove it to use the AITenant name"
    )
    if name is None:
        return []
    if not isinstance(name, str):
        return [(path, f"spec.gateway.name must be a string, got {json_type(name)}; {hint}")]
    if len(name) > _GATEWAY_NAME_MAX:
        return [
            (
                path,
                f"spec.gateway.name must be at most {_GATEWAY_NAME_MAX} characters "
                f"(got {len(name)}); {hint}",
            )
        ]
    if not _GATEWAY_NAME_RE.fullmatch(name):
        return [
            (
                path,
                f"spec.gateway.name {quote(name)} must be a valid DNS-1123 label (lowercase "
                f"alphanumeric and hyphens, starting and ending with alphanumeric); {hint}",
            )
        ]
    return []


def _issuer_problem(oidc: Mapping[str, Any]) -> str | None:
    hint = "set it to the https:// URL of your OIDC issuer, or remove spec.oidc"
    issuer = oidc.get("issuerUrl")
    if issuer is None:
        return f"spec.oidc.issuerUrl is required when spec.oidc is set; {hint}"
    if not isinstance(issuer, str):
        return f"spec.oidc.issuerUrl must be a string, got {json_type(issuer)}; {hint}"
    if not issuer:
        return f"spec.oidc.issuerUrl must not be empty; {hint}"
    if not _ISSUER_RE.fullmatch(issuer):
        return (
            f"spec.oidc.issuerUrl {quote(issuer)} must start with https:// and contain no "
            f"whitespace; {hint}"
        )
    if not _ISSUER_MIN <= len(issuer) <= _ISSUER_MAX:
        return (
            f"spec.oidc.issuerUrl must be between {_ISSUER_MIN} and {_ISSUER_MAX} characters "
            f"(got {len(issuer)}); {hint}"
        )
    return None


def _client_id_problem(oidc: Mapping[str, Any]) -> str | None:
    hint = "set it to the client ID registered with your OIDC issuer, or remove spec.oidc"
    client_id = oidc.get("clientId")
    if client_id is None:
        return f"spec.oidc.clientId is required when spec.oidc is set; {hint}"
    if not isinstance(client_id, str):
        return f"spec.oidc.clientId must be a string, got {json_type(client_id)}; {hint}"
    if not client_id:
        return f"spec.oidc.clientId must not be empty; {hint}"
    if any(char in _WHITESPACE for char in client_id):
        return f"spec.oidc.clientId {quote(client_id)} must not contain whitespace; {hint}"
    if len(client_id) > _CLIENT_ID_MAX:
        return (
            f"spec.oidc.clientId must be at most {_CLIENT_ID_MAX} characters "
            f"(got {len(client_id)}); {hint}"
        )
    return None


def _ttl_problem(oidc: Mapping[str, Any]) -> str | None:
    hint = f"use {OIDC_TTL_MIN} or more, or remove it to get the default of {OIDC_TTL_DEFAULT}"
    ttl = oidc.get("ttl")
    if ttl is None:
        return None
    integral = isinstance(ttl, int) or (
        isinstance(ttl, float) and math.isfinite(ttl) and ttl.is_integer()
    )
    if isinstance(ttl, bool) or not integral:
        return (
            f"spec.oidc.ttl must be an integer number of seconds, got {json_type(ttl)} "
            f"{json.dumps(ttl)}; {hint}"
        )
    if ttl < OIDC_TTL_MIN:
        return f"spec.oidc.ttl must be at least {OIDC_TTL_MIN} seconds (got {int(ttl)}); {hint}"
    return None


def _oidc_problems(spec: Mapping[str, Any]) -> list[Problem]:
    oidc = spec.get("oidc")
    if oidc is None:
        return []
    if not isinstance(oidc, Mapping):
        return [
            (
                ("spec", "oidc"),
                f"spec.oidc must be an object with issuerUrl and clientId, "
                f"got {json_type(oidc)}; set both fields, or remove spec.oidc",
            )
        ]
    checks: tuple[tuple[str, Callable[[Mapping[str, Any]], str | None]], ...] = (
        ("issuerUrl", _issuer_problem),
        ("clientId", _client_id_problem),
        ("ttl", _ttl_problem),
    )
    problems: list[Problem] = []
    for field, check in checks:
        message = check(oidc)
        if message is not None:
            problems.append((("spec", "oidc", field), message))
    return problems


def spec_problems(obj: Mapping[str, Any], gateway_namespace: str) -> list[Problem]:
    """Every violation of the CRD schema's spec rules, in a fixed order (gateway, then oidc)."""
    spec = obj.get("spec")
    if spec is None:
        return []
    if not isinstance(spec, Mapping):
        return [(("spec",), f"spec must be an object, got {json_type(spec)}")]
    return _gateway_problems(spec, gateway_namespace) + _oidc_problems(spec)
