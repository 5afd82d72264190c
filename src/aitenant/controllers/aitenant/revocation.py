"""API-key revocation: the controller calls the tenant's maas-api itself (docs/differences.md D2).

``DELETE <--maas-api-url-template>`` with the CA from ``--maas-api-ca-file``, a bounded timeout
and a few retries with backoff. maas-api answers ``{"revokedCount": n, ...}``; revoking twice
is harmless (the second answer counts 0), so the caller may retry after a crash.

A call may wait ``attempts`` times ``timeout`` on a maas-api that accepts connections but never
answers, so it never holds a reconcile worker: ``Revocations`` runs each tenant's revocation
as a task of its own (at most ``CONCURRENT_REVOCATIONS`` calls at once); a pass waits for it
only ``REVOCATION_GRACE`` seconds (a maas-api that answers does so well within it), and
otherwise ends and a later pass, woken when the task ends, reads its outcome. After a failure
the next call waits its own backoff (``RETRY_AFTER_FAILURE``, doubling to
``MAX_RETRY_AFTER_FAILURE``): the passes in between, requeued and woken at its end, do not
reset it as they would the controller's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

# Calls to maas-api at once; more tenants being deleted wait for a turn, no worker does.
CONCURRENT_REVOCATIONS: Final = 16
REVOCATION_GRACE: Final = 0.25
# Seconds before a tenant's revocation is called again after it failed, doubling per failure.
RETRY_AFTER_FAILURE: Final = 1.0
MAX_RETRY_AFTER_FAILURE: Final = 60.0


def maas_api_trust(ca_file: Path | None) -> ssl.SSLContext | bool:
    """What verifies maas-api's certificate: ``ca_file`` read now (the charm rotates it in place,
    and no restart may be needed), else the system's trust."""
    if ca_file is None:
        return True
    return ssl.create_default_context(cafile=str(ca_file))


class RevocationError(Exception):
    """maas-api did not confirm the revocation; the message names the URL and the cause."""


class KeyRevoker:
    def __init__(
        self,
        *,
        ca_file: Path | None,
        timeout: float = 10.0,
        attempts: int = 3,
        backoff: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.ca_file = ca_file
        self.timeout = timeout
        self.attempts = attempts
        self.backoff = backoff
        self.transport = transport

    def _verify(self) -> ssl.SSLContext | bool:
        return maas_api_trust(self.ca_file)

    async def revoke(self, url: str, *, attempts: int | None = None) -> int:
        """Revoke every key of the tenant behind ``url``; return how many were revoked."""
        import httpx  # only deletions need it: not imported at process start

        last = ""
        async with httpx.AsyncClient(
            verify=self._verify(), timeout=self.timeout, transport=self.transport
        ) as http:
            for attempt in range(attempts or self.attempts):
                if attempt:
                    await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
                try:
                    response = await http.delete(url)
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                    continue
                if response.is_success:
                    return _revoked_count(response)
                last = f"HTTP {response.status_code}: {response.text[:200].strip()}"
                if 400 <= response.status_code < 500 and response.status_code != 429:
                    break  # a client error will not heal by itself
        raise RevocationError(f"API key revocation via DELETE {url} failed: {last}")


def _revoked_count(response: httpx.Response) -> int:
    try:
        return int(response.json().get("revokedCount", 0))
    except (ValueError, AttributeError, TypeError):
        return 0


# (AITenant namespace, name, uid, URL): a tenant recreated under the same name is another one.
RevocationKey = tuple[str, str, str, str]


class Revocations:
    """Each tenant's revocation as a background task whose outcome a later pass reads.

    ``outcome`` starts the revocation the first time it is asked and answers None while it
    runs; once it has ended, the next call returns the revoked count or the RevocationError
    and forgets it; a failed revocation is tried again by the first pass after its own backoff
    (``_failure``). ``wake(namespace, name)`` is called when a task ends, or its backoff does,
    so that the tenant is reconciled at once rather than at its next requeue.
    """

    def __init__(
        self,
        revoker: KeyRevoker,
        *,
        concurrency: int = CONCURRENT_REVOCATIONS,
        retry_after_failure: float = RETRY_AFTER_FAILURE,
    ) -> None:
        self.revoker = revoker
        self.wake: Callable[[str, str], None] | None = None
        self.retry_after_failure = retry_after_failure
        self._turns = asyncio.Semaphore(concurrency)
        # New tenants' revocations (stale_keys.py) take turns of their own: deletions hanging
        # on maas-apis that never answer must not keep a new tenant from going Active.
        self._provisioning_turns = asyncio.Semaphore(concurrency)
        self._tasks: dict[RevocationKey, asyncio.Task[int]] = {}
        # Failures in a row and the loop time before which no new call is made.
        self._failed: dict[RevocationKey, tuple[int, float]] = {}

    async def outcome(
        self, key: RevocationKey, grace: float = REVOCATION_GRACE, *, provisioning: bool = False
    ) -> int | RevocationError | None:
        """The count revoked, the failure, or None while the revocation runs (started here if
        it was not running) after waiting for it at most ``grace`` seconds."""
        task = self._tasks.get(key)
        if task is None:
            if self._backing_off(key):
                return None
            turns = self._provisioning_turns if provisioning else self._turns
            task = asyncio.create_task(self._revoke(key, turns), name=f"revoke {key[0]}/{key[1]}")
            self._tasks[key] = task
            await asyncio.wait({task}, timeout=grace)
            # Ended within the grace: this pass reads it, nobody needs waking.
            task.add_done_callback(lambda _: self._woken(key))
        if not task.done():
            return None
        del self._tasks[key]
        if task.cancelled():
            return self._failure(key, f"API key revocation via DELETE {key[3]} was cancelled")
        error = task.exception()
        if error is None:
            self._failed.pop(key, None)
            return task.result()
        if isinstance(error, RevocationError):
            return self._failure(key, str(error))
        return self._failure(key, f"API key revocation via DELETE {key[3]} failed: {error!r}")

    def _failure(self, key: RevocationKey, message: str) -> RevocationError:
        """Record a failure: the next call waits a backoff, and the tenant is woken then."""
        failures = self._failed.get(key, (0, 0.0))[0] + 1
        delay = min(self.retry_after_failure * 2 ** (failures - 1), MAX_RETRY_AFTER_FAILURE)
        loop = asyncio.get_running_loop()
        self._failed[key] = (failures, loop.time() + delay)
        if delay > 0:
            loop.call_later(delay, self._woken_after_backoff, key)
        return RevocationError(message)

    def _backing_off(self, key: RevocationKey) -> bool:
        failed = self._failed.get(key)
        return failed is not None and asyncio.get_running_loop().time() < failed[1]

    def forget(self, namespace: str, name: str) -> None:
        """Drop (cancelling if running) every revocation of that tenant: it is gone."""
        for key in [k for k in self._tasks if k[:2] == (namespace, name)]:
            self._tasks.pop(key).cancel()
        for key in [k for k in self._failed if k[:2] == (namespace, name)]:
            del self._failed[key]

    async def once(self, url: str) -> int | RevocationError:
        """One call, in the caller's pass (the forced deletion's last try): the count revoked
        or why not."""

        async def call() -> int:
            async with self._turns:
                return await self.revoker.revoke(url, attempts=1)

        try:
            # Bounded, the wait for a turn included: the pass holds a worker.
            return await asyncio.wait_for(call(), self.revoker.timeout)
        except RevocationError as exc:
            return exc
        except TimeoutError:
            return RevocationError(f"API key revocation via DELETE {url} failed: no answer")

    def running(self) -> int:
        return sum(1 for task in self._tasks.values() if not task.done())

    async def _revoke(self, key: RevocationKey, turns: asyncio.Semaphore) -> int:
        async with turns:
            return await self.revoker.revoke(key[3])

    def _woken_after_backoff(self, key: RevocationKey) -> None:
        if key in self._failed and key not in self._tasks:
            self._wake(key)

    def _woken(self, key: RevocationKey) -> None:
        if key in self._tasks:
            self._wake(key)

    def _wake(self, key: RevocationKey) -> None:
        if self.wake is None:
            return
        # The controller may have stopped meanwhile; the outcome then waits for the next start.
        with contextlib.suppress(Exception):
            self.wake(key[0], key[1])
