"""Errors that carry the retry decision, and small predicates over Kubernetes API errors.

Exception
├── StepFailed          a reconcile step failed in a way the status must show
│                        (reason, message, phase, requeue_after: None = wait for an event);
│                        it is transient when raised with ``cause=`` an error that
│                        ``is_transient`` classifies so (a 409/429/5xx, a broken connection):
│                        then it is retried with backoff, not after ``requeue_after``
└── lightkube.ApiError  unexpected API failure → the runtime retries with backoff
"""

from __future__ import annotations

import httpx2
from lightkube import ApiError

# Answers worth retrying soon: conflicts, throttling, server trouble.
TRANSIENT_CODES = frozenset({409, 429, 500, 502, 503, 504})


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


def status_code(exc: BaseException) -> int | None:
    if isinstance(exc, ApiError):
        return exc.status.code
    return None


def is_transient(exc: BaseException | None) -> bool:
    """A conflict, throttling, server trouble or a broken connection: retry with backoff."""
    if isinstance(exc, ApiError):
        return exc.status.code in TRANSIENT_CODES
    return isinstance(exc, httpx2.TransportError)


def is_not_found(exc: BaseException) -> bool:
    return status_code(exc) == 404


def is_invalid(exc: BaseException) -> bool:
    """422: the object was refused as invalid (e.g. an immutable field changed)."""
    return status_code(exc) == 422


def is_conflict(exc: BaseException) -> bool:
    """409: AlreadyExists on create, or a stale resourceVersion on update."""
    return status_code(exc) == 409


def already_exists(exc: BaseException) -> bool:
    """A create refused because the object exists (a 409 may also be a plain conflict)."""
    return is_conflict(exc) and isinstance(exc, ApiError) and exc.status.reason == "AlreadyExists"


def api_message(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        return exc.status.message or str(exc)
    return str(exc)


def namespace_missing(exc: BaseException) -> bool:
    """A create refused because its namespace does not exist (yet)."""
    if not isinstance(exc, ApiError) or exc.status.code != 404:
        return False
    details = exc.status.details
    kind = (details.kind if details else "") or ""
    message = exc.status.message or ""
    return kind in ("namespace", "namespaces") or (
        message.startswith("namespaces ") and "not found" in message
    )
