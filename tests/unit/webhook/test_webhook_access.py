"""The ``use`` question (docs/differences.md D34): the SubjectAccessReview built from the
AdmissionReview's userInfo, the refusal, and where ``review`` asks it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lightkube.resources.authorization_v1 import SubjectAccessReview
from webhook_fakes import GW_NS, POLICY, FakeAuthorizer, FakeIndex, admission_request, review_body
from webhook_fakes import tenant as make_tenant

from aitenant import contract
from aitenant.webhook.access import (
    Answer,
    GatewayUse,
    UserInfo,
    refusal,
    subject_access_review,
    user_info_of,
)
from aitenant.webhook.review import DEFAULT_MAX_BYTES, review
from aitenant.webhook.sar import ApiAuthorizer
from aitenant.webhook.validators import WebhookPolicy

ALICE = {
    "username": "alice",
    "uid": "u-1",
    "groups": ["team-a", "system:authenticated"],
    "extra": {"scopes": ["a", "b"]},
}


def test_the_review_names_the_user_from_user_info_and_the_gateway() -> None:
    question = GatewayUse(user_info_of({"userInfo": ALICE}), "gw", "web")
    assert subject_access_review(question) == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "alice",
            "uid": "u-1",
            "groups": ["team-a", "system:authenticated"],
            "extra": {"scopes": ["a", "b"]},
            "resourceAttributes": {
                "group": "gateway.networking.k8s.io",
                "resource": "gateways",
                "verb": "use",
                "namespace": "gw",
                "name": "web",
            },
        },
    }


def test_malformed_user_info_counts_as_absent() -> None:
    info = user_info_of({"userInfo": {"username": 7, "groups": ["g", 3], "extra": {"k": "v"}}})
    assert info == UserInfo(username="", groups=("g",))
    spec = subject_access_review(GatewayUse(info, "gw", "web"))["spec"]
    assert spec["user"] == ""
    assert "uid" not in spec
    assert "extra" not in spec
    assert user_info_of({}) == UserInfo(username="")


def test_the_refusal_is_one_line_naming_the_role_rule() -> None:
    message = refusal(GatewayUse(UserInfo("alice"), "gw", "web"))
    assert message == (
        'user "alice" may not use Gateway gw/web: a network admin grants it with a Role rule '
        "{apiGroups: [gateway.networking.k8s.io], resources: [gateways], resourceNames: [web], "
        "verbs: [use]} in namespace gw"
    )
    assert "\n" not in refusal(GatewayUse(UserInfo("a\nb"), "gw", "web"))


def run(
    request: dict[str, Any],
    authorizer: FakeAuthorizer,
    *,
    index: FakeIndex | None = None,
    policy: WebhookPolicy = POLICY,
) -> dict[str, Any]:
    request["userInfo"] = ALICE
    status, document = asyncio.run(
        review(
            review_body(request),
            policy=policy,
            index=index or FakeIndex(),
            authorizer=authorizer,
            max_bytes=DEFAULT_MAX_BYTES,
        )
    )
    assert status == 200
    return document["response"]


def test_create_asks_about_the_requesting_user_and_the_tenants_gateway() -> None:
    authorizer = FakeAuthorizer()
    response = run(admission_request("CREATE", make_tenant("team-a", gateway="web")), authorizer)
    assert response["allowed"] is True
    assert authorizer.questions == [GatewayUse(user_info_of({"userInfo": ALICE}), GW_NS, "web")]


def test_create_without_use_is_refused_with_the_one_line() -> None:
    authorizer = FakeAuthorizer(Answer(False))
    response = run(admission_request("CREATE", make_tenant("team-a")), authorizer)
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert response["status"]["message"] == refusal(GatewayUse(UserInfo("alice"), GW_NS, "team-a"))


def test_an_unanswered_question_refuses_the_write() -> None:
    authorizer = FakeAuthorizer(Answer(False, "the API server did not answer within 3 s"))
    response = run(admission_request("CREATE", make_tenant("team-a")), authorizer)
    assert response["allowed"] is False
    assert response["status"]["code"] == 503
    assert response["status"]["message"] == (
        f'cannot check whether user "alice" may use Gateway {GW_NS}/team-a: the API server '
        "did not answer within 3 s; retry shortly"
    )


def test_a_write_the_rules_refuse_asks_nothing() -> None:
    authorizer = FakeAuthorizer()
    response = run(admission_request("CREATE", make_tenant("x", namespace="default")), authorizer)
    assert response["allowed"] is False
    assert authorizer.questions == []


def test_an_update_that_keeps_the_gateway_asks_nothing() -> None:
    authorizer = FakeAuthorizer(Answer(False))
    old = make_tenant("team-a", gateway="web")
    new = make_tenant("team-a", gateway="web", spec={"rbac": {}})
    assert run(admission_request("UPDATE", new, old), authorizer)["allowed"] is True
    assert authorizer.questions == []


@pytest.mark.parametrize("deleting", [False, True])
def test_an_update_that_moves_the_gateway_asks_about_the_new_one(deleting: bool) -> None:
    authorizer = FakeAuthorizer(Answer(False))
    old = make_tenant("team-a", gateway="web", deleting=deleting)
    new = make_tenant("team-a", gateway="other", deleting=deleting)
    response = run(admission_request("UPDATE", new, old), authorizer)
    assert response["status"]["message"] == refusal(GatewayUse(UserInfo("alice"), GW_NS, "other"))
    assert [q.name for q in authorizer.questions] == ["other"]


DEFAULT = contract.DEFAULT_TENANT_NAME


def test_the_default_tenants_name_on_another_gateway_is_refused_before_asking() -> None:
    authorizer = FakeAuthorizer()
    response = run(admission_request("CREATE", make_tenant(DEFAULT, gateway="web")), authorizer)
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        f'AITenant name "{DEFAULT}" is reserved for the default tenant on the default Gateway '
        f"{GW_NS}/maas-default-gateway; got Gateway {GW_NS}/web: choose another name or "
        "remove spec.gateway.name"
    )
    assert authorizer.questions == []
    # Without spec.gateway.name the tenant's Gateway is its own name: not the default either.
    response = run(admission_request("CREATE", make_tenant(DEFAULT)), authorizer)
    assert "is reserved for the default tenant" in response["status"]["message"]


def test_the_default_tenant_on_the_default_gateway_still_needs_use() -> None:
    authorizer = FakeAuthorizer(Answer(False))
    body = make_tenant(DEFAULT, gateway="maas-default-gateway")
    response = run(admission_request("CREATE", body), authorizer)
    assert response["status"]["message"] == refusal(
        GatewayUse(UserInfo("alice"), GW_NS, "maas-default-gateway")
    )


def test_only_the_controller_may_place_the_default_tenant_elsewhere() -> None:
    policy = WebhookPolicy(
        aitenant_namespace=POLICY.aitenant_namespace,
        gateway_namespace=GW_NS,
        controller_username="alice",
    )
    body = make_tenant(DEFAULT, gateway="legacy-gw")
    assert run(admission_request("CREATE", body), FakeAuthorizer(), policy=policy)["allowed"]


def test_moving_the_default_tenant_off_the_default_gateway_is_refused() -> None:
    old = make_tenant(DEFAULT, gateway="maas-default-gateway")
    new = make_tenant(DEFAULT, gateway="web")
    response = run(admission_request("UPDATE", new, old), FakeAuthorizer())
    assert "is reserved for the default tenant" in response["status"]["message"]
    # A stored one elsewhere may still be relabelled: the Gateway did not change.
    kept = make_tenant(DEFAULT, gateway="web", spec={"rbac": {}})
    assert run(admission_request("UPDATE", kept, new), FakeAuthorizer())["allowed"] is True


class FakeClient:
    def __init__(self, reply: Any = None, error: Exception | None = None, delay: float = 0):
        self.reply, self.error, self.delay = reply, error, delay
        self.created: list[Any] = []

    async def create(self, obj: Any) -> Any:
        self.created.append(obj)
        await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return self.reply


QUESTION = GatewayUse(UserInfo("alice"), "gw", "web")


def ask(client: FakeClient, timeout: float = 1.0) -> Answer:
    return asyncio.run(ApiAuthorizer(client, timeout=timeout).may_use(QUESTION))  # type: ignore[arg-type]


@pytest.mark.parametrize("allowed", [True, False])
def test_the_api_servers_answer_is_taken(allowed: bool) -> None:
    reply = SubjectAccessReview.from_dict(
        {**subject_access_review(QUESTION), "status": {"allowed": allowed}}
    )
    client = FakeClient(reply)
    assert ask(client) == Answer(allowed)
    [sent] = client.created
    assert sent.to_dict() == subject_access_review(QUESTION)


def test_a_slow_api_server_refuses_within_the_timeout() -> None:
    answer = ask(FakeClient(delay=5), timeout=0.05)
    assert (answer.allowed, answer.problem) == (
        False,
        "the API server did not answer within 0.05 s",
    )


def test_an_api_error_refuses() -> None:
    answer = ask(FakeClient(error=RuntimeError("connection refused")))
    assert answer.allowed is False
    assert "connection refused" in answer.problem
