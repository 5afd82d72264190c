"""Transient answers to reads are retried inside the client; writes and watches never."""

from __future__ import annotations

import httpx2
import pytest

from aitenant.runtime.client.retry import RetryReads


class Answers:
    """Answers each request with the next prepared status code (then 200)."""

    def __init__(self, *codes: int | str) -> None:
        self.codes = list(codes)
        self.seen = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.seen += 1
        code = self.codes.pop(0) if self.codes else 200
        if code == "cut":
            raise httpx2.ReadError("connection reset", request=request)
        assert isinstance(code, int)
        return httpx2.Response(code, headers={"Retry-After": "0"} if code == 429 else {})


async def send(answers: Answers, method: str, url: str = "https://api.test/x") -> int:
    retries: list[int] = []
    transport = RetryReads(
        httpx2.MockTransport(answers), base_delay=0.001, on_retry=lambda: retries.append(1)
    )
    async with httpx2.AsyncClient(transport=transport) as client:
        response = await client.request(method, url)
    assert len(retries) == answers.seen - 1
    return response.status_code


async def test_a_read_survives_two_transient_answers() -> None:
    answers = Answers(503, 429)
    assert await send(answers, "GET") == 200
    assert answers.seen == 3


async def test_a_broken_connection_is_retried_too() -> None:
    answers = Answers("cut")
    assert await send(answers, "GET") == 200
    assert answers.seen == 2


async def test_the_third_transient_answer_reaches_the_caller() -> None:
    answers = Answers(500, 500, 500, 500)
    assert await send(answers, "GET") == 500
    assert answers.seen == 3


async def test_not_found_is_an_answer_not_a_fault() -> None:
    answers = Answers(404)
    assert await send(answers, "GET") == 404
    assert answers.seen == 1


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
async def test_writes_are_never_retried(method: str) -> None:
    answers = Answers(503)
    assert await send(answers, method) == 503
    assert answers.seen == 1


async def test_watches_are_never_retried() -> None:
    answers = Answers(503)
    assert await send(answers, "GET", "https://api.test/x?watch=true") == 503
    assert answers.seen == 1
