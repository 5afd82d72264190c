"""Reads that meet a transient answer are retried at once, inside the HTTP client.

A GET or LIST is idempotent, so a 429, a 5xx or a broken connection is retried twice, after
50 ms and 100 ms (or the server's Retry-After, up to 1 s), before the reconcile sees it. A
pass makes several reads; without this, a few percent of faulty answers fail most passes and
push tenants into minutes of backoff. Writes and watches are never retried here: a write's
outcome may be unknown, and an informer resumes its own watch. Nor is a read cut short by
closing the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx2

from aitenant.runtime.client.transport import is_watch

RETRIED_CODES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 1.0


def retry_after(response: httpx2.Response, default: float) -> float:
    value = response.headers.get("Retry-After", "")
    return min(float(value), MAX_RETRY_AFTER) if value.isdigit() else default


class RetryReads(httpx2.AsyncBaseTransport):
    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        *,
        attempts: int = 3,
        base_delay: float = 0.05,
        on_retry: Callable[[], None] = lambda: None,
    ) -> None:
        self.inner = inner
        self.attempts = attempts
        self.base_delay = base_delay
        self.on_retry = on_retry
        self._closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "GET" or is_watch(request):
            return await self.inner.handle_async_request(request)
        delay = self.base_delay
        for _ in range(self.attempts - 1):
            try:
                response = await self.inner.handle_async_request(request)
            except httpx2.TransportError:
                if self._closed:  # cut by closing the client: nothing transient about it
                    raise
                wait = delay
            else:
                if response.status_code not in RETRIED_CODES:
                    return response
                wait = retry_after(response, delay)
                await response.aclose()
            self.on_retry()
            await asyncio.sleep(wait)
            delay *= 2
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        self._closed = True
        await self.inner.aclose()
