"""What an answer of the Kubernetes API means: predicates over lightkube's ``ApiError`` and
httpx2's transport errors, the exceptions the client raises.

``is_transient``: a conflict, throttling, server trouble or a broken connection, worth
retrying soon with backoff; the others name one answer each (not found, invalid, conflict,
AlreadyExists, a namespace that does not exist).
"""

from __future__ import annotations

import httpx2
from lightkube import ApiError

# Answers worth retrying soon: conflicts, throttling, server trouble.
TRANSIENT_CODES = frozenset({409, 429, 500, 502, 503, 504})


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
