"""Errors that carry the retry decision, and small predicates over Kubernetes API errors.

Exception
├── StepFailed          a reconcile step failed in a way the status must show
│                        (reason, message, phase, requeue_after: None = wait for an event)
└── lightkube.ApiError  unexpected API failure → the runtime retries with backoff
"""

from __future__ import annotations

from lightkube import ApiError


class StepFailed(Exception):
    def __init__(
        self,
        reason: str,
        message: str,
        *,
        requeue_after: float | None = 30.0,
        phase: str = "Failed",
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.requeue_after = requeue_after
        self.phase = phase


def status_code(exc: BaseException) -> int | None:
    if isinstance(exc, ApiError):
        return exc.status.code
    return None


def is_not_found(exc: BaseException) -> bool:
    return status_code(exc) == 404


def is_conflict(exc: BaseException) -> bool:
    """409: AlreadyExists on create, or a stale resourceVersion on update."""
    return status_code(exc) == 409


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
