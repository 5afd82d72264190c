"""Revocations: a failed call is not made again before its own backoff has passed."""

from __future__ import annotations

import asyncio

import httpx

from aitenant.controllers.aitenant.revocation import KeyRevoker, RevocationError, Revocations

KEY = ("ai-tenants", "red", "uid-1", "https://maas-api-red.infra.svc:8443/x")


async def test_a_failed_revocation_waits_its_backoff_however_often_it_is_asked() -> None:
    calls: list[float] = []

    async def refuse(request: httpx.Request) -> httpx.Response:
        calls.append(asyncio.get_running_loop().time())
        return httpx.Response(503, text="down")

    revoker = KeyRevoker(
        ca_file=None, backoff=0.0, attempts=1, transport=httpx.MockTransport(refuse)
    )
    revocations = Revocations(revoker, retry_after_failure=0.2)
    woken: list[tuple[str, str]] = []
    revocations.wake = lambda namespace, name: woken.append((namespace, name))

    first = await revocations.outcome(KEY)
    assert isinstance(first, RevocationError)
    assert "HTTP 503: down" in str(first)
    assert len(calls) == 1
    # Passes right after (a Retry, an event) make no call while it backs off.
    for _ in range(5):
        assert await revocations.outcome(KEY) is None
    assert len(calls) == 1
    assert woken == []
    await asyncio.sleep(0.3)
    assert woken == [("ai-tenants", "red")], "woken when its backoff ends"

    second = await revocations.outcome(KEY)
    assert isinstance(second, RevocationError)
    assert len(calls) == 2
    # Twice as long now: still backing off after the first backoff's length.
    await asyncio.sleep(0.25)
    assert await revocations.outcome(KEY) is None
    assert len(calls) == 2


async def test_success_and_forgetting_clear_the_backoff() -> None:
    answers = [httpx.Response(503), httpx.Response(200, json={"revokedCount": 3})]

    async def answer(request: httpx.Request) -> httpx.Response:
        return answers.pop(0)

    revoker = KeyRevoker(
        ca_file=None, backoff=0.0, attempts=1, transport=httpx.MockTransport(answer)
    )
    revocations = Revocations(revoker, retry_after_failure=30.0)
    assert isinstance(await revocations.outcome(KEY), RevocationError)
    assert await revocations.outcome(KEY) is None
    revocations.forget("ai-tenants", "red")  # the tenant is gone: nothing remembered
    assert await revocations.outcome(KEY) == 3
