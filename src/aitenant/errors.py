"""Errors that carry the retry decision, and the outcome each maps to.

Exception
├── StepFailed          a reconcile step failed in a way the status must show
│                        (reason, message, phase, requeue_after: None = wait for an event);
│                        it is transient when raised with ``cause=`` an error that
│                        ``is_transient`` classifies so (a 409/429/5xx, a broken connection):
│                        then it is retried with backoff, not after ``requeue_after``
└── lightkube.ApiError  unexpected API failure → the runtime retries with backoff

``after_failure`` maps a reported ``StepFailed`` to the runtime's outcome. What an API answer
means (``is_transient``, ``is_not_found``, …) is the client layer's:
``aitenant.runtime.client.api_errors``.
"""

from __future__ import annotations

from lightkube import ApiError

from aitenant.runtime.client.api_errors import api_message, is_transient
from aitenant.runtime.control.controller import Done, RequeueAfter, Result, Retry


class StepFailed(Exception):
    def __init__(
        self,
        reason: str,
        message: str,
        *,
        requeue_after: float | None = 30.0,
        phase: str = "Failed",
        cause: BaseException | None = None,
    ) -> None:
        """``cause``: the error this failure reports; a transient one (``is_transient``) makes
        the failure transient. Nothing is read from the exception being handled: a StepFailed
        raised in an ``except`` block is transient only when told so."""
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.requeue_after = requeue_after
        self.phase = phase
        self.cause = cause
        self.transient = is_transient(cause)

    @classmethod
    def from_api(cls, reason: str, exc: ApiError, what: str = "") -> StepFailed:
        """A request's failure: ``<what>: <the API's message>`` (the message alone without
        ``what``), caused by ``exc``."""
        message = f"{what}: {api_message(exc)}" if what else api_message(exc)
        return cls(reason, message, cause=exc)


def after_failure(failure: StepFailed) -> Result:
    """The outcome of a reported step failure: backoff for a transient one, else its wait."""
    if failure.transient:
        return Retry(failure.message)
    if failure.requeue_after is None:
        return Done()
    return RequeueAfter(failure.requeue_after)
