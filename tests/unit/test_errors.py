"""A reported step failure: when it is transient, and the outcome it maps to."""

from __future__ import annotations

import pytest
from lightkube import ApiError

from aitenant.errors import StepFailed, after_failure
from aitenant.runtime.control.controller import Controller, Done, Key, RequeueAfter, Result, Retry
from aitenant.runtime.serving.metrics import Metrics

from .runtime.client.test_api_errors import api_error
from .runtime.control.test_controller import KEY, count


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


def test_a_step_failure_maps_to_one_outcome() -> None:
    cause = api_error(503)
    transient = StepFailed("GatewayClaimFailed", "busy", requeue_after=30, cause=cause)
    assert after_failure(transient) == Retry("busy"), "backoff, not the 30 s wait"
    assert after_failure(StepFailed("GatewayCheckFailed", "no gateway")) == RequeueAfter(30)
    lasting = StepFailed("GatewayClaimFailed", "forbidden", cause=api_error(403))
    assert after_failure(lasting) == RequeueAfter(30)
    assert after_failure(StepFailed("InvalidPlacement", "bad", requeue_after=None)) == Done()


async def test_a_step_failure_raised_inside_an_except_block_is_not_retried_with_backoff() -> None:
    """The reported failure says what it is; the 503 being handled does not leak into it."""
    contexts: list[BaseException | None] = []

    async def reconcile(key: Key) -> Result:
        try:
            try:
                raise api_error(503)
            except ApiError:
                raise StepFailed("TenantNamespaceFailed", "terminating", requeue_after=5)  # noqa: B904
        except StepFailed as failure:
            contexts.append(failure.__context__)
            return after_failure(failure)

    ctl = Controller("t", reconcile, metrics=Metrics(), workers=1)
    assert await ctl.process(KEY) == RequeueAfter(5)
    assert isinstance(contexts[0], ApiError), "the 503 was the context, and was not read"
    assert ctl.queue.failures(KEY) == 0
    assert count(ctl.metrics, "requeue") == 1
    ctl.queue.shutdown()
