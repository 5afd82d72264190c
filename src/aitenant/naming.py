"""Pure naming rules shared by the reconciler and the admission webhook (docs/contract.md §3.1).

Every name the controller derives from an AITenant is computed here, from strings only, so the
webhook and the reconciler can never disagree about which Gateway a tenant uses or what its
children are called. Nothing in this module performs I/O.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

from aitenant import contract

DNS1123_LABEL_MAX_LENGTH: Final = 63
_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_RE: Final = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE: Final = re.compile(rf"{_DNS1123_LABEL_FMT}(\.{_DNS1123_LABEL_FMT})*")
# Kubernetes builds this text with validation.RegexError(msg, fmt, "my-name", "123-abc"); the
# double space before "or" is what that helper produces and is reproduced on purpose.
DNS1123_LABEL_REGEX_ERROR: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    f"regex used for validation is '{_DNS1123_LABEL_FMT}')"
)
DNS1123_LABEL_DOTS_ERROR: Final = "must not contain dots"

# The Gateway AuthPolicy of the default tenant's platform (docs/platform.md §8).
DEFAULT_GATEWAY_AUTH_POLICY: Final = "maas-gateway-auth"
GATEWAY_AUTH_POLICY_SUFFIX: Final = "-maas-auth"

# A cut name ends in 16 hex digits (64 bits) of SHA-256 of the whole name: no one can search
# for an AITenant name whose cut name equals another tenant's name (docs/contract.md §3.1).
HASH_LEN: Final = 16
# The Gateway AuthPolicy keeps the 8 digits it was first created with: it is create-only, so a
# new name would leave the old policy on the Gateway (docs/platform.md §8, §13).
LEGACY_HASH_LEN: Final = 8
_CLAIM_HASH_LEN: Final = 32


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tenant_namespace_for(name: str, subscription_namespace: str) -> str:
    """Tenant namespace of the AITenant ``name``.

    The default tenant, and any AITenant named exactly like ``--maas-subscription-namespace``,
    maps to that namespace (``models-as-a-service`` when it is empty); every other tenant gets
    ``ai-tenant-<name>``.
    """
    if name == contract.DEFAULT_TENANT_NAME or (
        subscription_namespace and name == subscription_namespace
    ):
        return subscription_namespace or contract.DEFAULT_SUBSCRIPTION_NAMESPACE
    return contract.TENANT_NAMESPACE_PREFIX + name


def tenants_for_namespace(namespace: str, subscription_namespace: str) -> list[str]:
    """The AITenant names whose tenant namespace ``namespace`` can be (``tenant_namespace_for``
    inverted), most likely first: only platform administrators choose these names, so a
    namespace, unlike a tenant admin's labels, says whose config it holds. Two names only for
    ``--maas-subscription-namespace`` when an AITenant is named like it (docs/contract.md §3.1).
    """
    shared = subscription_namespace or contract.DEFAULT_SUBSCRIPTION_NAMESPACE
    if namespace == shared:
        names = [contract.DEFAULT_TENANT_NAME, shared]
        return sorted(set(names), key=names.index)
    prefix = contract.TENANT_NAMESPACE_PREFIX
    name = namespace[len(prefix) :] if namespace.startswith(prefix) else ""
    if name and tenant_namespace_for(name, subscription_namespace) == namespace:
        return [name]
    return []


def gateway_ref_for(obj: Mapping[str, Any], gateway_namespace: str) -> tuple[str, str]:
    """(namespace, name) of the Gateway an AITenant uses: ``spec.gateway.name`` or its own name.

    The namespace is always the configured gateway namespace; the AITenant cannot choose it.
    Malformed ``spec``/``gateway`` values count as absent.
    """
    metadata = obj.get("metadata")
    own_name = metadata.get("name") if isinstance(metadata, Mapping) else None
    spec = obj.get("spec")
    gateway = spec.get("gateway") if isinstance(spec, Mapping) else None
    explicit = gateway.get("name") if isinstance(gateway, Mapping) else None
    if isinstance(explicit, str) and explicit:
        return gateway_namespace, explicit
    return gateway_namespace, own_name if isinstance(own_name, str) else ""


def _strip_one_trailing_dash(text: str) -> str:
    return text[:-1] if text.endswith("-") else text


def bounded_name(
    prefix: str, name: str, suffix: str, max_len: int, *, hash_len: int = HASH_LEN
) -> str:
    """``prefix + name + suffix`` if it fits in ``max_len``, else a truncated and hashed form.

    The hashed form is ``prefix + <name truncated, stripped of - and .> + suffix + "-" + h`` with
    ``h = sha256(name).hex()[:hash_len]``; when the prefix and suffix leave no room for the name,
    it degrades to ``prefix-without-trailing-dash + "-" + h (+ suffix if that still fits)``.
    """
    full = prefix + name + suffix
    if len(full) <= max_len:
        return full
    digest = _sha256_hex(name)[:hash_len]
    budget = max_len - len(prefix) - len(suffix) - hash_len - 1
    if budget < 1:
        base = _strip_one_trailing_dash(prefix)
        fallback = f"{base}-{digest}{suffix}"
        if len(fallback) <= max_len:
            return fallback
        return f"{base}-{digest}"
    # Nothing left of the name: as much of the hash as the budget holds stands in for it.
    trimmed = name[:budget].strip("-.") or digest[:budget]
    return f"{prefix}{trimmed}{suffix}-{digest}"


def tenant_admin_role_name(name: str) -> str:
    """Role granted to tenant admins in the tenant namespace: ``aitenant-<name>-tenant-admin``."""
    return bounded_name(contract.ROLE_PREFIX, name, contract.TENANT_ADMIN_SUFFIX, 63)


def object_admin_role_name(name: str) -> str:
    """Role to read the AITenant itself, in its namespace: ``aitenant-<name>-object-admin``."""
    return bounded_name(contract.ROLE_PREFIX, name, contract.OBJECT_ADMIN_SUFFIX, 63)


def claim_name(gw_namespace: str, gw_name: str) -> str:
    """Name of the ConfigMap that claims a Gateway: ``gateway-claim-`` + 32 hex chars (46)."""
    return contract.CLAIM_PREFIX + _sha256_hex(f"{gw_namespace}/{gw_name}")[:_CLAIM_HASH_LEN]


def tenant_suffix(name: str) -> str:
    """Suffix of per-tenant platform resources: none for the default tenant, else ``-<name>``."""
    return "" if name == contract.DEFAULT_TENANT_NAME else f"-{name}"


def gateway_auth_policy_name(tenant: str, gateway_name: str) -> str:
    """The Gateway AuthPolicy of a tenant's platform: the shared one for the default tenant,
    else one per Gateway (docs/platform.md §8)."""
    if not tenant_suffix(tenant):
        return DEFAULT_GATEWAY_AUTH_POLICY
    # Bounded like the other derived names, so any Gateway name (a DNS label) gives one.
    return bounded_name(
        "",
        gateway_name,
        GATEWAY_AUTH_POLICY_SUFFIX,
        DNS1123_LABEL_MAX_LENGTH,
        hash_len=LEGACY_HASH_LEN,
    )


def dns1123_label_errors(value: str) -> list[str]:
    """Kubernetes ``validation.IsDNS1123Label``: an empty list when ``value`` is a valid label.

    Length is counted in bytes, as in Go. A value that is a valid subdomain but not a label can
    only contain dots, and gets Kubernetes' short ``must not contain dots`` message.
    """
    errors: list[str] = []
    if len(value.encode("utf-8")) > DNS1123_LABEL_MAX_LENGTH:
        errors.append(f"must be no more than {DNS1123_LABEL_MAX_LENGTH} characters")
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            errors.append(DNS1123_LABEL_DOTS_ERROR)
        else:
            errors.append(DNS1123_LABEL_REGEX_ERROR)
    return errors
