"""The aiohttp front end: routing, the body cap, and one log line per denial or bad request."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from webhook_fakes import POLICY, FakeAuthorizer, FakeIndex, admission_request, review_body, tenant

from aitenant import contract
from aitenant.webhook.server import admission_app

LOGGER = "aitenant.webhook.server"


@pytest.fixture
async def client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    app = admission_app(
        policy=POLICY,
        authorizer=FakeAuthorizer(),
        index=FakeIndex([tenant("team-b", gateway="shared")]),
    )
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


def _server_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == LOGGER]


async def test_allowed_review(client: TestClient[web.Request, web.Application]) -> None:
    body = review_body(admission_request("CREATE", tenant("team-a")))
    response = await client.post(contract.WEBHOOK_PATH, data=body)
    assert response.status == 200
    assert response.content_type == "application/json"
    assert await response.json() == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "req-1", "allowed": True},
    }


async def test_denial_is_logged_once(
    client: TestClient[web.Request, web.Application], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    body = review_body(admission_request("CREATE", tenant("team-a", gateway="shared")))
    response = await client.post(contract.WEBHOOK_PATH, data=body)
    document = await response.json()
    assert document["response"]["allowed"] is False
    assert document["response"]["status"]["code"] == 403
    records = _server_records(caplog)
    assert len(records) == 1
    assert records[0].levelno == logging.INFO
    assert "uid req-1" in records[0].getMessage()
    assert "already in use by AITenant ai-tenants/team-b" in records[0].getMessage()


async def test_allowed_review_is_not_logged(
    client: TestClient[web.Request, web.Application], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    body = review_body(admission_request("CREATE", tenant("team-a")))
    await client.post(contract.WEBHOOK_PATH, data=body)
    assert _server_records(caplog) == []


async def test_bad_request_is_http_400_and_logged(
    client: TestClient[web.Request, web.Application], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    response = await client.post(contract.WEBHOOK_PATH, data=b"not json")
    assert response.status == 400
    assert await response.json() == {"error": "request body is not valid JSON"}
    records = _server_records(caplog)
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING


async def test_only_post_on_the_webhook_path(
    client: TestClient[web.Request, web.Application],
) -> None:
    assert (await client.get(contract.WEBHOOK_PATH)).status == 405
    body = review_body(admission_request("CREATE", tenant()))
    assert (await client.post("/validate", data=body)).status == 404


async def test_oversized_body_with_content_length_is_413(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    app = admission_app(
        policy=POLICY, authorizer=FakeAuthorizer(), index=FakeIndex(), max_bytes=100
    )
    async with TestClient(TestServer(app)) as small:
        response = await small.post(contract.WEBHOOK_PATH, data=b"x" * 101)
        assert response.status == 413
        assert await response.json() == {"error": "AdmissionReview body exceeds 100 bytes"}
    assert len(_server_records(caplog)) == 1


async def test_oversized_chunked_body_is_413() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"x" * 50

    app = admission_app(
        policy=POLICY, authorizer=FakeAuthorizer(), index=FakeIndex(), max_bytes=100
    )
    async with TestClient(TestServer(app)) as small:
        response = await small.post(contract.WEBHOOK_PATH, data=chunks())
        assert response.status == 413


async def test_body_at_the_cap_is_served() -> None:
    body = review_body(admission_request("CREATE", tenant()))
    app = admission_app(
        policy=POLICY, authorizer=FakeAuthorizer(), index=FakeIndex(), max_bytes=len(body)
    )
    async with TestClient(TestServer(app)) as exact:
        response = await exact.post(contract.WEBHOOK_PATH, data=body)
        assert response.status == 200


def test_admission_app_rejects_a_non_positive_cap() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        admission_app(policy=POLICY, authorizer=FakeAuthorizer(), index=FakeIndex(), max_bytes=0)


# --- clients that stall (docs/design.md §5) ----------------------------------------------------


async def _stalled_request(
    port: int, length: int, sent: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Headers announcing ``length`` bytes, then only ``sent`` of them."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST {contract.WEBHOOK_PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n"
    writer.write(head.encode() + b" " * sent)
    await writer.drain()
    return reader, writer


async def _closed_after(connection: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> float:
    """Seconds until the server closed the connection (5 at most)."""
    reader, writer = connection
    started = asyncio.get_running_loop().time()
    with contextlib.suppress(ConnectionError, TimeoutError):
        while await asyncio.wait_for(reader.read(1024), 5):
            pass
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    return asyncio.get_running_loop().time() - started


async def test_a_stalled_body_is_dropped_at_the_deadline(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    app = admission_app(
        policy=POLICY, authorizer=FakeAuthorizer(), index=FakeIndex(), body_deadline=0.3
    )
    async with TestServer(app) as server:
        assert server.port is not None
        stalled = await _stalled_request(server.port, 1000, 999)
        assert await _closed_after(stalled) < 2  # not the 5 s the read waits at most
    assert "not received within" in caplog.text


async def test_a_small_review_does_not_wait_behind_held_slots() -> None:
    app = admission_app(
        policy=POLICY,
        authorizer=FakeAuthorizer(),
        index=FakeIndex(),
        body_deadline=2,
        concurrent_bodies=1,
    )
    big = 1024 * 1024
    async with TestServer(app) as server, TestClient(server) as client:
        assert server.port is not None
        holder = await _stalled_request(server.port, big, 10)  # holds the only slot
        await asyncio.sleep(0.1)
        waiting = await _stalled_request(server.port, big, 10)  # waits for it
        started = asyncio.get_running_loop().time()
        body = review_body(admission_request("CREATE", tenant("team-a")))
        response = await client.post(contract.WEBHOOK_PATH, data=body)
        assert response.status == 200
        assert asyncio.get_running_loop().time() - started < 1
        # Both held connections are gone once their deadline passed, the waiting one too.
        assert await _closed_after(holder) < 3
        assert await _closed_after(waiting) < 3


def test_admission_app_rejects_non_positive_limits() -> None:
    with pytest.raises(ValueError, match="body_deadline"):
        admission_app(
            policy=POLICY, authorizer=FakeAuthorizer(), index=FakeIndex(), body_deadline=0
        )
    with pytest.raises(ValueError, match="concurrent_bodies"):
        admission_app(
            policy=POLICY, authorizer=FakeAuthorizer(), index=FakeIndex(), concurrent_bodies=0
        )
