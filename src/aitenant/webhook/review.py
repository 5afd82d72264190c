"""The AdmissionReview envelope around the AITenant rules (``validators``): parse a review,
decide it, answer it. Never raises.

The rules are pure; when they allow a write that attaches the AITenant to a Gateway (a create,
an update that moves it), the one question only the API server can answer, whether the
requesting user may ``use`` that Gateway (``access``, docs/differences.md D34), goes to the
authorizer the caller gives (``sar.ApiAuthorizer`` in the server), last: a write the rules
refuse costs no API call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NotRequired, TypedDict

from aitenant import contract
from aitenant.gateway_index import TenantsByGateway
from aitenant.naming import gateway_ref_for
from aitenant.spec_rules import json_type, quote
from aitenant.webhook.access import GatewayAuthorizer, GatewayUse, refusal, unanswered, user_info_of
from aitenant.webhook.validators import (
    AITENANT_KIND,
    AITENANT_RESOURCE,
    Verdict,
    WebhookPolicy,
    allow,
    deny,
    moves_gateway,
    validate_create,
    validate_update,
)

log = logging.getLogger(__name__)

ADMISSION_API_VERSION: Final = "admission.k8s.io/v1"
ADMISSION_REVIEW_KIND: Final = "AdmissionReview"
# An UPDATE review carries the old and the new object; etcd caps an object at 1.5 MiB.
DEFAULT_MAX_BYTES: Final = 4 * 1024 * 1024

_REASONS: Final = {
    400: "BadRequest",
    403: "Forbidden",
    413: "RequestEntityTooLarge",
    500: "InternalError",
    503: "ServiceUnavailable",
}


async def _check_gateway_use(
    obj: Mapping[str, Any],
    request: Mapping[str, Any],
    policy: WebhookPolicy,
    authorizer: GatewayAuthorizer,
) -> Verdict | None:
    """The requesting user may ``use`` the Gateway (docs/differences.md D34)."""
    gw_namespace, gw_name = gateway_ref_for(obj, policy.gateway_namespace)
    question = GatewayUse(user_info_of(request), gw_namespace, gw_name)
    answer = await authorizer.may_use(question)
    if answer.problem:
        return deny(unanswered(question, answer.problem), code=503)
    return None if answer.allowed else deny(refusal(question))


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


def _with_request_identity(obj: Mapping[str, Any], request: Mapping[str, Any]) -> Mapping[str, Any]:
    """Fill metadata.namespace/name from the request when the object lacks them."""
    metadata = obj.get("metadata")
    meta: dict[str, Any] = dict(metadata) if isinstance(metadata, Mapping) else {}
    changed = False
    for key in ("namespace", "name"):
        value = request.get(key)
        if not meta.get(key) and isinstance(value, str) and value:
            meta[key] = value
            changed = True
    return {**obj, "metadata": meta} if changed else obj


async def _decide(
    request: Mapping[str, Any],
    *,
    policy: WebhookPolicy,
    index: TenantsByGateway,
    authorizer: GatewayAuthorizer,
) -> Verdict:
    verdict, attaches = _decide_rules(request, policy=policy, index=index)
    if not verdict.allowed or attaches is None:
        return verdict
    return await _check_gateway_use(attaches, request, policy, authorizer) or verdict


def _decide_rules(
    request: Mapping[str, Any], *, policy: WebhookPolicy, index: TenantsByGateway
) -> tuple[Verdict, Mapping[str, Any] | None]:
    """The pure rules' verdict, and the AITenant whose Gateway the user must be allowed to
    ``use`` when the request attaches it to one (a create, an update that moves it)."""
    operation = request.get("operation")
    if operation in ("DELETE", "CONNECT"):
        return allow(), None
    if operation not in ("CREATE", "UPDATE"):
        return deny(f"unsupported admission operation {quote(str(operation))}", code=400), None
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        return deny("AdmissionReview request.object is missing", code=400), None
    obj = _with_request_identity(obj, request)
    username = user_info_of(request).username
    if operation == "CREATE":
        return validate_create(obj, policy=policy, index=index, username=username), obj
    old = request.get("oldObject")
    if not isinstance(old, Mapping):
        return deny("AdmissionReview request.oldObject is missing", code=400), None
    old = _with_request_identity(old, request)
    verdict = validate_update(old, obj, policy=policy, index=index, username=username)
    return verdict, (obj if moves_gateway(old, obj, policy) else None)


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


async def review(
    body: bytes,
    *,
    policy: WebhookPolicy,
    index: TenantsByGateway,
    authorizer: GatewayAuthorizer,
    max_bytes: int,
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
        verdict = await _decide(request, policy=policy, index=index, authorizer=authorizer)
    except Exception as exc:  # a bug must not turn into a dropped connection
        log.exception("AITenant admission for uid %s failed", uid)
        verdict = deny(f"internal error while validating the AITenant: {exc!r}", code=500)
    return _reply(uid, verdict)
