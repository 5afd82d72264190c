"""Whether the requesting user may ``use`` a Gateway: the question the webhook puts to the API
server before it lets an AITenant attach to one (docs/differences.md D34). Pure: no I/O.

The question is a SubjectAccessReview for the user the AdmissionReview names (its
``request.userInfo``: username, uid, groups, extra), on the ``use`` verb of that Gateway in the
gateway namespace, the way RBAC's ``bind`` verb keeps a user from granting a Role they do not
hold. A network admin grants it with a Role rule (docs/contract.md §2.4); cluster-admins hold
every verb. ``webhook.sar`` asks it; ``validators`` decides with the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from aitenant.spec_rules import quote

GATEWAY_GROUP: Final = "gateway.networking.k8s.io"
GATEWAY_RESOURCE: Final = "gateways"
USE_VERB: Final = "use"
SAR_API_VERSION: Final = "authorization.k8s.io/v1"


@dataclass(frozen=True)
class UserInfo:
    """The requesting user as the API server authenticated it (``request.userInfo``)."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def user_info_of(request: Mapping[str, Any]) -> UserInfo:
    """``request.userInfo`` of an AdmissionReview; malformed parts count as absent, so a
    request without a user is asked about the empty username and refused."""
    raw = request.get("userInfo")
    info: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    username, uid = info.get("username"), info.get("uid")
    groups = info.get("groups")
    extra = info.get("extra")
    return UserInfo(
        username=username if isinstance(username, str) else "",
        uid=uid if isinstance(uid, str) else "",
        groups=tuple(g for g in groups if isinstance(g, str)) if isinstance(groups, list) else (),
        extra={
            key: tuple(v for v in values if isinstance(v, str))
            for key, values in (extra.items() if isinstance(extra, Mapping) else ())
            if isinstance(key, str) and isinstance(values, list)
        },
    )


@dataclass(frozen=True)
class GatewayUse:
    """May ``user`` use Gateway ``namespace``/``name``?"""

    user: UserInfo
    namespace: str
    name: str


def subject_access_review(question: GatewayUse) -> dict[str, Any]:
    """The SubjectAccessReview that asks ``question``, as the JSON body to create."""
    spec: dict[str, Any] = {
        "user": question.user.username,
        "resourceAttributes": {
            "group": GATEWAY_GROUP,
            "resource": GATEWAY_RESOURCE,
            "verb": USE_VERB,
            "namespace": question.namespace,
            "name": question.name,
        },
    }
    if question.user.uid:
        spec["uid"] = question.user.uid
    if question.user.groups:
        spec["groups"] = list(question.user.groups)
    if question.user.extra:
        spec["extra"] = {key: list(values) for key, values in question.user.extra.items()}
    return {"apiVersion": SAR_API_VERSION, "kind": "SubjectAccessReview", "spec": spec}


def refusal(question: GatewayUse) -> str:
    """One line: who may not use which Gateway, and the Role rule that grants it."""
    return (
        f"user {quote(question.user.username)} may not use Gateway "
        f"{question.namespace}/{question.name}: a network admin grants it with a Role rule "
        f"{{apiGroups: [{GATEWAY_GROUP}], resources: [{GATEWAY_RESOURCE}], "
        f"resourceNames: [{question.name}], verbs: [{USE_VERB}]}} in namespace "
        f"{question.namespace}"
    )


def unanswered(question: GatewayUse, problem: str) -> str:
    """The refusal when the API server could not be asked (the webhook fails closed)."""
    return (
        f"cannot check whether user {quote(question.user.username)} may use Gateway "
        f"{question.namespace}/{question.name}: {problem}; retry shortly"
    )


@dataclass(frozen=True)
class Answer:
    """The API server's answer: allowed, or not; ``problem`` when it could not be asked."""

    allowed: bool
    problem: str = ""


class GatewayAuthorizer(Protocol):
    """Asks the API server a ``GatewayUse`` question (``webhook.sar.ApiAuthorizer``)."""

    async def may_use(self, question: GatewayUse) -> Answer: ...
