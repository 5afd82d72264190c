"""Admission decisions for AITenant and the AdmissionReview envelope around them. Pure: no I/O.

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
  6. Gateway uniqueness, served from the informer cache (docs/differences.md D3); denied while
     it has not synced.
UPDATE
  1. old and new are AITenants; 2. guards; 4. spec rules on the new object, ratcheted: a value
  that did not change is not re-judged, so a tenant stored before these rules existed can still
  be relabelled or have its finalizer removed; 6. Gateway uniqueness on the new object, only
  when the update moves the AITenant to another Gateway and the AITenant is not being deleted
  (docs/differences.md D29): any other update cannot create sharing, and judging it would keep
  two tenants that already share a Gateway from ever losing their finalizers.
DELETE and CONNECT are allowed (the webhook is not registered for them anyway).

Gateway uniqueness counts AITenants that are being deleted and skips the object itself
(docs/contract.md §2.2): a Gateway is free again only once its previous tenant is gone.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NotRequired, TypedDict

from aitenant import contract
from aitenant.gateway_index import TenantsByGateway
from aitenant.naming import gateway_ref_for
from aitenant.spec_rules import json_type, quote, spec_problems

log = logging.getLogger(__name__)

AITENANT_KIND: Final = "AITenant"
AITENANT_RESOURCE: Final = "aitenants"
ADMISSION_API_VERSION: Final = "admission.k8s.io/v1"
ADMISSION_REVIEW_KIND: Final = "AdmissionReview"
# An UPDATE review carries the old and the new object; etcd caps an object at 1.5 MiB.
DEFAULT_MAX_BYTES: Final = 4 * 1024 * 1024

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
_REASONS: Final = {
    400: "BadRequest",
    403: "Forbidden",
    413: "RequestEntityTooLarge",
    500: "InternalError",
    503: "ServiceUnavailable",
}


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
    """The settings the rules depend on (``--aitenant-namespace``, ``--gateway-namespace``)."""

    aitenant_namespace: str
    gateway_namespace: str


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


def validate_create(obj: object, *, policy: WebhookPolicy, index: TenantsByGateway) -> Verdict:
    """Decide a CREATE of ``obj`` (the AITenant as a JSON-like mapping)."""
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
    if (verdict := _check_gateway_unique(obj, policy, index)) is not None:
        return verdict
    return allow()


def validate_update(
    old: object, new: object, *, policy: WebhookPolicy, index: TenantsByGateway
) -> Verdict:
    """Decide an UPDATE from ``old`` to ``new`` (main resource only; status is not intercepted)."""
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
    gateway_namespace = policy.gateway_namespace
    return gateway_ref_for(old, gateway_namespace) != gateway_ref_for(new, gateway_namespace)


def _being_deleted(obj: Mapping[str, Any]) -> bool:
    return bool(_meta_str(obj, "deletionTimestamp"))


# --- AdmissionReview --------------------------------------------------------------------------


class AdmissionStatus(TypedDict):
    """``response.status`` of a denial (a metav1.Status subset)."""

    code: int
    reason: str
    message: str


class AdmissionResponse(TypedDict):
    """``response`` of an admission.k8s.io/v1 AdmissionReview."""

    uid: str
    allowed: bool
    status: NotRequired[AdmissionStatus]


class AdmissionReviewResponse(TypedDict):
    """The whole reply to the API server."""

    apiVersion: str
    kind: str
    response: AdmissionResponse


class ErrorBody(TypedDict):
    """Plain HTTP error body for requests that cannot be answered with an AdmissionReview."""

    error: str


def _error(status: int, message: str) -> tuple[int, dict[str, Any]]:
    return status, dict(ErrorBody(error=message))


def _reply(uid: str, verdict: Verdict) -> tuple[int, dict[str, Any]]:
    response = AdmissionResponse(uid=uid, allowed=verdict.allowed)
    if not verdict.allowed:
        response["status"] = AdmissionStatus(
            code=verdict.code,
            reason=_REASONS.get(verdict.code, "Forbidden"),
            message=verdict.message,
        )
    review_response = AdmissionReviewResponse(
        apiVersion=ADMISSION_API_VERSION, kind=ADMISSION_REVIEW_KIND, response=response
    )
    return 200, dict(review_response)


def _target_problem(request: Mapping[str, Any], kind: str, resource: str) -> str | None:
    """Refuse reviews about anything but the main resource this path validates."""
    got = request.get("kind"), request.get("resource")
    if not isinstance(got[0], Mapping) or not isinstance(got[1], Mapping):
        return "AdmissionReview request.kind and request.resource are required"
    got_kind = (got[0].get("group"), got[0].get("version"), got[0].get("kind"))
    got_resource = (got[1].get("group"), got[1].get("version"), got[1].get("resource"))
    want_kind = (contract.GROUP, contract.VERSION, kind)
    want_resource = (contract.GROUP, contract.VERSION, resource)
    sub_resource = request.get("subResource") or ""
    if got_kind != want_kind or got_resource != want_resource or sub_resource:
        shown = "/".join(str(part or "") for part in got_resource)
        if sub_resource:
            shown += f"/{sub_resource}"
        return (
            f"this webhook only validates {contract.API_VERSION} {kind} "
            f"({resource}), got kind {got_kind[2]!s} of resource {shown}"
        )
    return None


def _with_request_identity(obj: object, request: Mapping[str, Any]) -> object:
    """Fill metadata.namespace/name from the request when the object lacks them."""
    if not isinstance(obj, Mapping):
        return obj
    metadata = obj.get("metadata")
    meta: dict[str, Any] = dict(metadata) if isinstance(metadata, Mapping) else {}
    changed = False
    for key in ("namespace", "name"):
        value = request.get(key)
        if not meta.get(key) and isinstance(value, str) and value:
            meta[key] = value
            changed = True
    return {**obj, "metadata": meta} if changed else obj


def _decide(
    request: Mapping[str, Any], *, policy: WebhookPolicy, index: TenantsByGateway
) -> Verdict:
    operation = request.get("operation")
    if operation in ("DELETE", "CONNECT"):
        return allow()
    if operation not in ("CREATE", "UPDATE"):
        return deny(f"unsupported admission operation {quote(str(operation))}", code=400)
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        return deny("AdmissionReview request.object is missing", code=400)
    obj = _with_request_identity(obj, request)
    if operation == "CREATE":
        return validate_create(obj, policy=policy, index=index)
    old = request.get("oldObject")
    if not isinstance(old, Mapping):
        return deny("AdmissionReview request.oldObject is missing", code=400)
    return validate_update(_with_request_identity(old, request), obj, policy=policy, index=index)


@dataclass(frozen=True)
class _Opened:
    """A well-formed AdmissionReview: its uid and request."""

    uid: str
    request: Mapping[str, Any]


def _open(body: bytes, max_bytes: int) -> _Opened | tuple[int, dict[str, Any]]:
    """The review's uid and request, or the reply that refuses a malformed review."""
    if len(body) > max_bytes:
        return _error(413, f"AdmissionReview body exceeds {max_bytes} bytes")
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return _error(400, "request body is not valid JSON")
    if not isinstance(document, Mapping):
        return _error(
            400, f"request body must be an AdmissionReview object, got {json_type(document)}"
        )
    request = document.get("request")
    raw_uid = request.get("uid") if isinstance(request, Mapping) else None
    uid = raw_uid if isinstance(raw_uid, str) and raw_uid else None

    problem: str | None = None
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if kind != ADMISSION_REVIEW_KIND:
        problem = f"expected kind {ADMISSION_REVIEW_KIND}, got {quote(str(kind or ''))}"
    elif api_version != ADMISSION_API_VERSION:
        problem = (
            f"unsupported AdmissionReview version {quote(str(api_version or ''))}; "
            f"only {ADMISSION_API_VERSION} is served"
        )
    elif not isinstance(request, Mapping):
        problem = "AdmissionReview has no request"
    elif uid is None:
        problem = "AdmissionReview request.uid is missing"
    if problem is not None:
        return _reply(uid, deny(problem, code=400)) if uid else _error(400, problem)
    assert isinstance(request, Mapping)
    assert uid is not None
    return _Opened(uid, request)


def review(
    body: bytes, *, policy: WebhookPolicy, index: TenantsByGateway, max_bytes: int
) -> tuple[int, dict[str, Any]]:
    """Answer one AdmissionReview request body: (HTTP status, JSON document). Never raises.

    A well-formed review gets HTTP 200 and an AdmissionReview reply. A malformed one is denied
    inside an AdmissionReview (code 400, BadRequest) when it carries a ``request.uid`` the API
    server can match, and otherwise gets HTTP 400 (413 when too large) with ``{"error": ...}``.
    """
    opened = _open(body, max_bytes)
    if not isinstance(opened, _Opened):
        return opened
    uid, request = opened.uid, opened.request
    if (target := _target_problem(request, AITENANT_KIND, AITENANT_RESOURCE)) is not None:
        return _reply(uid, deny(target, code=400))
    try:
        verdict = _decide(request, policy=policy, index=index)
    except Exception as exc:  # a bug must not turn into a dropped connection
        log.exception("AITenant admission for uid %s failed", uid)
        verdict = deny(f"internal error while validating the AITenant: {exc!r}", code=500)
    return _reply(uid, verdict)
