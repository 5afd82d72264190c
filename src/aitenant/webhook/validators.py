"""Admission decisions for AITenant. Pure: no I/O. ``review`` wraps them in the AdmissionReview
envelope and asks the one question only the API server can answer, rule 8 (``access``).

Rules, in evaluation order (docs/contract.md §2.2 plus docs/differences.md D4); the first failing
rule decides and its message is what ``kubectl`` prints after
``admission webhook "vaitenant.kb.io" denied the request:``.

CREATE
  1. the object is an AITenant;
  2. configuration guards (AITenant namespace and gateway namespace are set);
  3. name at most 41 characters, then a DNS-1123 label (docs/differences.md D4; the CRD's CEL
     messages);
  4. spec rules of the CRD schema (``spec.gateway.name``, ``spec.oidc``);
  5. namespace placement: only the configured AITenant namespace;
  6. the default tenant's name only on the default Gateway (docs/differences.md D36);
  7. Gateway uniqueness, served from the informer cache (docs/differences.md D3); denied while
     it has not synced;
  8. the requesting user may ``use`` the Gateway (a SubjectAccessReview, docs/differences.md
     D34), asked by ``review`` once 1-7 allow the write.
UPDATE
  1. old and new are AITenants; 2. guards; 4. spec rules on the new object, ratcheted: a value
  that did not change is not re-judged, so a tenant stored before these rules existed can still
  be relabelled or have its finalizer removed; 6. the default tenant's name, and 8. ``use`` of
  the new Gateway, only when the update moves the AITenant to another Gateway (whatever else
  it changes, an update that keeps the Gateway attaches to nothing new); 7. Gateway uniqueness
  on the new object, only when the update moves the AITenant to another Gateway and the
  AITenant is not being deleted (docs/differences.md D29): any other update cannot create
  sharing, and judging it would keep two tenants that already share a Gateway from ever losing
  their finalizers.
DELETE and CONNECT are allowed (the webhook is not registered for them anyway).

Gateway uniqueness counts AITenants that are being deleted and skips the object itself
(docs/contract.md §2.2): a Gateway is free again only once its previous tenant is gone.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from aitenant import contract
from aitenant.gateway_index import TenantsByGateway
from aitenant.naming import gateway_ref_for
from aitenant.spec_rules import json_type, quote, spec_problems

log = logging.getLogger(__name__)

AITENANT_KIND: Final = "AITenant"
AITENANT_RESOURCE: Final = "aitenants"

MSG_NAME_TOO_LONG: Final = (
    f"AITenant name must be at most {contract.MAX_AITENANT_NAME} characters "
    "(required for per-tenant resource naming with 63-character Kubernetes limit)"
)
MSG_NAME_NOT_DNS1123: Final = (
    "AITenant name must be a valid DNS-1123 label "
    "(lowercase alphanumeric and hyphens, starting and ending with alphanumeric)"
)
MSG_NOT_SYNCED: Final = (
    "AITenant webhook is not ready: the AITenant cache has not synced yet; retry shortly"
)
MSG_NO_AITENANT_NAMESPACE: Final = "AITenant infrastructure namespace is not configured"
MSG_NO_GATEWAY_NAMESPACE: Final = "gateway namespace is not configured"

_NAME_RE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


# --- verdicts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """The outcome of one admission decision; ``code`` becomes ``response.status.code``."""

    allowed: bool
    message: str = ""
    code: int = 200


def allow() -> Verdict:
    """Admit the request."""
    return Verdict(allowed=True)


def deny(message: str, code: int = 403) -> Verdict:
    """Refuse the request with ``message`` (403 Forbidden unless told otherwise)."""
    return Verdict(allowed=False, message=message, code=code)


# --- collaborators ----------------------------------------------------------------------------


@dataclass(frozen=True)
class WebhookPolicy:
    """The settings the rules depend on (``--aitenant-namespace``, ``--gateway-namespace``,
    ``--gateway-name``) and the controller's own username (``sar.own_username``; "" when
    unknown), whose bootstrap may give the default tenant a legacy Tenant's Gateway
    (docs/contract.md §4.1)."""

    aitenant_namespace: str
    gateway_namespace: str
    default_gateway_name: str = contract.DEFAULT_GATEWAY_NAME
    controller_username: str = ""


# --- small helpers ----------------------------------------------------------------------------

_MISSING: Final = object()


def _describe(obj: object) -> str:
    if not isinstance(obj, Mapping):
        return json_type(obj)
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not api_version and not kind:
        return "an object without apiVersion and kind"
    return f"{api_version or ''}, Kind={kind or ''}"


def _is_aitenant(obj: object) -> bool:
    return (
        isinstance(obj, Mapping)
        and obj.get("kind") == AITENANT_KIND
        and obj.get("apiVersion") == contract.API_VERSION
    )


def _meta_str(obj: Mapping[str, Any], key: str) -> str:
    metadata = obj.get("metadata")
    value = metadata.get(key) if isinstance(metadata, Mapping) else None
    return value if isinstance(value, str) else ""


def _lookup(obj: Mapping[str, Any], path: tuple[str, ...]) -> object:
    current: object = obj
    for key in path:
        if not isinstance(current, Mapping) or key not in current:
            return _MISSING
        current = current[key]
    return current


def _unchanged(old: Mapping[str, Any], new: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    """Whether the value a problem concerns is the same in both objects (ratcheting).

    A missing required field is judged on its closest present parent: adding ``spec.oidc``
    without ``issuerUrl`` is a change, relabelling a tenant that always lacked it is not.
    """
    while path and _lookup(new, path) is _MISSING:
        path = path[:-1]
    return _lookup(old, path) == _lookup(new, path)


# --- rules ------------------------------------------------------------------------------------


def _guard(policy: WebhookPolicy) -> Verdict | None:
    if not policy.aitenant_namespace:
        return deny(MSG_NO_AITENANT_NAMESPACE)
    if not policy.gateway_namespace:
        return deny(MSG_NO_GATEWAY_NAMESPACE)
    return None


def _check_name(obj: Mapping[str, Any]) -> Verdict | None:
    name = _meta_str(obj, "name")
    if len(name) > contract.MAX_AITENANT_NAME:
        return deny(MSG_NAME_TOO_LONG)
    if not _NAME_RE.fullmatch(name):
        return deny(MSG_NAME_NOT_DNS1123)
    return None


def _check_placement(obj: Mapping[str, Any], policy: WebhookPolicy) -> Verdict | None:
    namespace = _meta_str(obj, "namespace")
    if namespace == policy.aitenant_namespace:
        return None
    return deny(
        f"AITenant {namespace}/{_meta_str(obj, 'name')} must be created in the configured "
        f"AITenant infrastructure namespace {quote(policy.aitenant_namespace)}"
    )


def _check_gateway_unique(
    obj: Mapping[str, Any], policy: WebhookPolicy, index: TenantsByGateway
) -> Verdict | None:
    if not index.has_synced():
        return deny(MSG_NOT_SYNCED, code=503)
    gw_namespace, gw_name = gateway_ref_for(obj, policy.gateway_namespace)
    try:
        holders = index.tenants_for_gateway(gw_namespace, gw_name)
    except Exception as exc:  # a broken index must deny, never allow
        return deny(f"failed to list AITenants: {exc}")
    me = (_meta_str(obj, "namespace"), _meta_str(obj, "name"))
    for holder in sorted(set(holders)):
        # Only the AITenant namespace counts: misplaced tenants never claim a Gateway.
        if holder == me or holder[0] != policy.aitenant_namespace:
            continue
        return deny(
            f"gateway {gw_namespace}/{gw_name} is already in use by AITenant "
            f"{holder[0]}/{holder[1]}; each AITenant requires a dedicated Gateway for "
            "isolation; please create a new Gateway for this tenant or specify a different "
            "gateway name in spec.gateway.name"
        )
    return None


def _check_reserved_name(
    obj: Mapping[str, Any], policy: WebhookPolicy, username: str
) -> Verdict | None:
    """The default tenant's name only on the default Gateway (docs/differences.md D36): else a
    requester with ``use`` on a Gateway of their own could take the default tenant's namespace,
    its config and the RoleBindings left there. Only the controller's own bootstrap may place it
    elsewhere, on the Gateway a legacy Tenant names (docs/contract.md §4.1)."""
    if _meta_str(obj, "name") != contract.DEFAULT_TENANT_NAME:
        return None
    gw_namespace, gw_name = gateway_ref_for(obj, policy.gateway_namespace)
    if gw_name == policy.default_gateway_name:
        return None
    if policy.controller_username and username == policy.controller_username:
        return None
    return deny(
        f"AITenant name {quote(contract.DEFAULT_TENANT_NAME)} is reserved for the default "
        f"tenant on the default Gateway {gw_namespace}/{policy.default_gateway_name}; got "
        f"Gateway {gw_namespace}/{gw_name}: choose another name or remove spec.gateway.name"
    )


def validate_create(
    obj: object, *, policy: WebhookPolicy, index: TenantsByGateway, username: str = ""
) -> Verdict:
    """Decide the pure rules of a CREATE of ``obj`` (the AITenant as a JSON-like mapping);
    ``use`` of its Gateway is asked after them (``review``)."""
    if not _is_aitenant(obj):
        return deny(f"expected AITenant object, got {_describe(obj)}")
    assert isinstance(obj, Mapping)
    if (verdict := _guard(policy)) is not None:
        return verdict
    if (verdict := _check_name(obj)) is not None:
        return verdict
    if problems := spec_problems(obj, policy.gateway_namespace):
        return deny(problems[0][1])
    if (verdict := _check_placement(obj, policy)) is not None:
        return verdict
    if (verdict := _check_reserved_name(obj, policy, username)) is not None:
        return verdict
    if (verdict := _check_gateway_unique(obj, policy, index)) is not None:
        return verdict
    return allow()


def validate_update(
    old: object,
    new: object,
    *,
    policy: WebhookPolicy,
    index: TenantsByGateway,
    username: str = "",
) -> Verdict:
    """Decide the pure rules of an UPDATE from ``old`` to ``new`` (main resource only; status is
    not intercepted); ``use`` of a new Gateway is asked after them (``review``)."""
    if not _is_aitenant(old):
        return deny(f"expected AITenant object for old, got {_describe(old)}")
    if not _is_aitenant(new):
        return deny(f"expected AITenant object for new, got {_describe(new)}")
    assert isinstance(old, Mapping)
    assert isinstance(new, Mapping)
    if (verdict := _guard(policy)) is not None:
        return verdict
    for path, message in spec_problems(new, policy.gateway_namespace):
        if not _unchanged(old, new, path):
            return deny(message)
    if moves_gateway(old, new, policy) and (verdict := _check_reserved_name(new, policy, username)):
        return verdict
    if (
        _may_create_sharing(old, new, policy)
        and (verdict := _check_gateway_unique(new, policy, index)) is not None
    ):
        return verdict
    return allow()


def _may_create_sharing(
    old: Mapping[str, Any], new: Mapping[str, Any], policy: WebhookPolicy
) -> bool:
    """Whether an UPDATE can make two AITenants share a Gateway (docs/differences.md D29).

    Only a move to another Gateway can; a tenant being deleted is on its way out of its
    Gateway, whatever its spec says.
    """
    if _being_deleted(old) or _being_deleted(new):
        return False
    return moves_gateway(old, new, policy)


def moves_gateway(old: Mapping[str, Any], new: Mapping[str, Any], policy: WebhookPolicy) -> bool:
    gateway_namespace = policy.gateway_namespace
    return gateway_ref_for(old, gateway_namespace) != gateway_ref_for(new, gateway_namespace)


def _being_deleted(obj: Mapping[str, Any]) -> bool:
    return bool(_meta_str(obj, "deletionTimestamp"))
