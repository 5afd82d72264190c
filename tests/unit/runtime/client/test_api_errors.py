"""What an API answer means: which failures are retried soon, with backoff."""

from __future__ import annotations

import httpx2
import pytest
from lightkube import ApiError

from aitenant.runtime.client.api_errors import already_exists, is_transient


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


def test_only_already_exists_means_a_create_found_the_object() -> None:
    assert already_exists(api_error(409, "AlreadyExists"))
    assert not already_exists(api_error(409, "Conflict")), "retry the create, do not adopt"
    assert not already_exists(api_error(500))
