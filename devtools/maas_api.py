"""A stand-in for a tenant's maas-api: only the internal API-key revocation endpoint.

HTTPS on loopback with a certificate from an in-memory CA (trustme), so the controller's real
revocation client (docs/differences.md D2) is exercised: TLS verification, status codes, JSON
body.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import trustme
from aiohttp import web


async def serve_loopback_tls(app: web.Application, ca: trustme.CA) -> tuple[web.AppRunner, int]:
    """Serve ``app`` over HTTPS on a free loopback port with a certificate from ``ca``."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(ctx)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx).start()
    return runner, int(runner.addresses[0][1])


@dataclass
class FakeMaasApi:
    workdir: Path
    keys: Counter[str] = field(default_factory=Counter)  # active keys per tenant
    calls: list[tuple[str, int]] = field(default_factory=list)  # (tenant, revokedCount)
    fail_status: int | None = None
    # Tenants whose revocation is accepted but not answered until released (``hold``).
    held: dict[str, asyncio.Event] = field(default_factory=dict[str, asyncio.Event])
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def ca_file(self) -> Path:
        return self.workdir / "maas-api-ca.pem"

    @property
    def ca_key_file(self) -> Path:
        """Key of the same CA: the controller issues maas-api serving certs from it
        (docs/differences.md D9)."""
        return self.workdir / "maas-api-ca.key"

    @property
    def url_template(self) -> str:
        return f"https://127.0.0.1:{self.port}/internal/v1/tenants/{{tenant}}/api-keys"

    async def _revoke(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        if (gate := self.held.get(tenant)) is not None:
            await gate.wait()
        if self.fail_status is not None:
            self.calls.append((tenant, -1))
            return web.json_response({"error": "unavailable"}, status=self.fail_status)
        count = self.keys.pop(tenant, 0)
        self.calls.append((tenant, count))
        return web.json_response(
            {
                "revokedCount": count,
                "message": f"Successfully revoked {count} active API key(s) for tenant {tenant}",
            }
        )

    def hold(self, tenants: list[str]) -> None:
        """Accept these tenants' revocations over TLS and answer none until ``release``."""
        for tenant in tenants:
            self.held.setdefault(tenant, asyncio.Event())

    def release(self, tenants: list[str]) -> None:
        for tenant in tenants:
            if (gate := self.held.pop(tenant, None)) is not None:
                gate.set()

    def revocations(self, tenant: str) -> list[int]:
        return [n for t, n in self.calls if t == tenant]

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(self.ca_file))
        ca.private_key_pem.write_to_path(str(self.ca_key_file))
        app = web.Application()
        app.router.add_delete("/internal/v1/tenants/{tenant}/api-keys", self._revoke)
        self._runner, self.port = await serve_loopback_tls(app, ca)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
