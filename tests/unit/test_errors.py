"""Which failures are retried soon, with backoff."""

from __future__ import annotations

import httpx2
import pytest
from lightkube import ApiError

from aitenant.errors import StepFailed, already_exists, is_transient


def api_error(code: int, reason: str = "") -> ApiError:
    request = httpx2.Request("GET", "https://api.invalid/x")
    status = {"kind": "Status", "code": code, "reason": reason, "message": f"answer {code}"}
    response = httpx2.Response(code, request=request, json=status)
    return ApiError(request=request, response=response)


@pytest.mark.parametrize(("code", "transient"), [
    (409, True), (429, True), (500, True), (502, True), (503, True), (504, True),
    (400, False), (403, False), (404, False), (422, False),
])  # fmt: skip
def test_api_answers(code: int, transient: bool) -> None:
    assert is_transient(api_error(code)) is transient


def test_broken_connections_are_transient_other_errors_are_not() -> None:
    assert is_transient(httpx2.ConnectError("refused"))
    assert is_transient(httpx2.ReadTimeout("slow"))
    assert not is_transient(ValueError("bad input"))
    assert not is_transient(None)


def test_step_failed_is_transient_only_when_its_cause_is() -> None:
    def fail(code: int) -> None:
        try:
            raise api_error(code)
        except ApiError as exc:
            raise StepFailed("GatewayClaimFailed", str(exc), cause=exc) from None

    with pytest.raises(StepFailed) as throttled:
        fail(429)
    assert throttled.value.transient
    assert isinstance(throttled.value.cause, ApiError)
    with pytest.raises(StepFailed) as forbidden:
        fail(403)
    assert not forbidden.value.transient
    assert not StepFailed("InvalidPlacement", "wrong namespace").transient


def test_a_step_failed_raised_inside_an_except_block_does_not_inherit_transience() -> None:
    """The exception being handled is not read: without ``cause`` a failure is not transient,
    whether it is raised ``from None``, ``from`` another error, or with its context kept."""

    def inside_handler(chain: str) -> None:
        try:
            raise api_error(503)
        except ApiError as exc:
            failure = StepFailed("TenantNamespaceFailed", "namespace is terminating")
            if chain == "none":
                raise failure from None
            if chain == "cause":
                raise failure from exc
            raise failure  # noqa: B904  # the context kept on purpose

    for chain in ("none", "cause", "context"):
        with pytest.raises(StepFailed) as info:
            inside_handler(chain)
        assert not info.value.transient, chain


def test_only_already_exists_means_a_create_found_the_object() -> None:
    assert already_exists(api_error(409, "AlreadyExists"))
    assert not already_exists(api_error(409, "Conflict")), "retry the create, do not adopt"
    assert not already_exists(api_error(500))


def test_step_failed_from_an_api_answer_says_what_failed_and_keeps_its_cause() -> None:
    conflict, refused = api_error(409), api_error(422)
    named = StepFailed.from_api("RBACReconcileFailed", conflict, "patch Role ns/admin")
    assert (named.reason, named.message) == (
        "RBACReconcileFailed",
        "patch Role ns/admin: answer 409",
    )
    assert named.cause is conflict
    assert named.transient
    alone = StepFailed.from_api("GatewayClaimFailed", refused)
    assert alone.message == "answer 422"
    assert not alone.transient
