"""API-key revocation: the controller calls the tenant's maas-api itself (docs/differences.md D2).

``DELETE <--maas-api-url-template>`` with the CA from ``--maas-api-ca-file``, a bounded timeout
and a few retries with backoff. maas-api answers ``{"revokedCount": n, ...}``; revoking twice
is harmless (the second answer counts 0), so the caller may retry after a crash.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)


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
        # Read the CA on every call: the charm rotates it and we must not need a restart.
        if self.ca_file is None:
            return True
        return ssl.create_default_context(cafile=str(self.ca_file))

    async def revoke(self, url: str) -> int:
        """Revoke every key of the tenant behind ``url``; return how many were revoked."""
        import httpx  # only deletions need it: not imported at process start

        last = ""
        async with httpx.AsyncClient(
            verify=self._verify(), timeout=self.timeout, transport=self.transport
        ) as http:
            for attempt in range(self.attempts):
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
