"""A fault-injecting HTTPS proxy between a controller and the real API server (tests only).

It forwards every request to the API server unchanged, except that, at the configured rates,
it answers instead with a 500, 503 or 429 ``Status``, a 409 conflict on writes, adds a delay,
or cuts a watch stream after a few seconds. The controller's kubeconfig points at the proxy;
everything else (tests, the readiness simulator) talks to the API server directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import trustme
import yaml
from aiohttp import web

from devtools.maas_api import serve_loopback_tls

WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
# Hop-by-hop and length headers are recomputed by each side.
_DROP_HEADERS = {
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "accept-encoding",
}


@dataclass
class FaultPlan:
    """Rates are probabilities per request; ``watch_cut_after`` is the mean stream life."""

    error_rate: float = 0.0  # 500 / 503 / 429 on any non-watch request
    conflict_rate: float = 0.0  # 409 on writes
    max_delay: float = 0.0  # uniform extra latency, seconds
    watch_cut_after: float | None = None
    seed: int = 0


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    headers = {"Retry-After": "1"} if code == 429 else {}
    # Exactly "application/json", no charset: that is what the API server sends and what
    # clients (lightkube) look for before decoding a Status into an API error.
    headers["Content-Type"] = "application/json"
    return web.Response(status=code, body=json.dumps(body).encode(), headers=headers)


@dataclass
class FaultProxy:
    upstream: str  # https://127.0.0.1:<api port>
    workdir: Path
    plan: FaultPlan = field(default_factory=FaultPlan)
    injected: Counter[str] = field(default_factory=Counter)
    forwarded: int = 0
    port: int = 0
    _runner: web.AppRunner | None = None
    _http: httpx.AsyncClient | None = None
    _ca: trustme.CA | None = None

    def __post_init__(self) -> None:
        self._rng = random.Random(self.plan.seed)

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._ca = trustme.CA()
        self._ca.cert_pem.write_to_path(str(self.workdir / "proxy-ca.pem"))
        # The local API server self-signs; the proxy is test plumbing on loopback.
        self._http = httpx.AsyncClient(
            base_url=self.upstream,
            verify=False,
            timeout=httpx.Timeout(30, read=None),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=50),
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner, self.port = await serve_loopback_tls(app, self._ca)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._http is not None:
            await self._http.aclose()

    def kubeconfig(self, token: str, path: Path) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "proxy",
                    "cluster": {
                        "server": f"https://127.0.0.1:{self.port}",
                        "certificate-authority": str(self.workdir / "proxy-ca.pem"),
                    },
                }
            ],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "u"}}],
            "current-context": "proxy",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        plan = self.plan
        is_watch = request.query.get("watch") in ("true", "1")
        if plan.max_delay:
            await asyncio.sleep(self._rng.uniform(0, plan.max_delay))
        if not is_watch and self._rng.random() < plan.error_rate:
            code = self._rng.choice((500, 503, 429))
            self.injected[str(code)] += 1
            reason = {500: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests"}
            return _status(code, reason[code], f"injected fault {code}")
        if request.method in WRITE_METHODS and self._rng.random() < plan.conflict_rate:
            self.injected["409"] += 1
            return _status(
                409,
                "Conflict",
                "injected conflict: the object has been modified; please apply your changes "
                "to the latest version and try again",
            )
        self.forwarded += 1
        assert self._http is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROP_HEADERS}
        # Relayed byte for byte: the API server must not compress (it gzips large LIST
        # responses, which the client could not decode once the proxy drops the header).
        headers["Accept-Encoding"] = "identity"
        body = await request.read()
        upstream = self._http.build_request(
            request.method, request.path_qs, headers=headers, content=body or None
        )
        response = await self._http.send(upstream, stream=True)
        out = web.StreamResponse(status=response.status_code)
        for key, value in response.headers.items():
            if key.lower() not in _DROP_HEADERS and key.lower() != "content-encoding":
                out.headers[key] = value
        try:
            await out.prepare(request)
            await self._relay(request, response, out, is_watch)
        except ConnectionResetError:  # the client went away (a SIGKILLed controller)
            pass
        finally:
            await response.aclose()
        return out

    async def _relay(
        self, request: web.Request, response: httpx.Response, out: web.StreamResponse, watch: bool
    ) -> None:
        plan = self.plan
        deadline = None
        if watch and plan.watch_cut_after:
            deadline = asyncio.get_running_loop().time() + self._rng.uniform(
                0.5 * plan.watch_cut_after, 1.5 * plan.watch_cut_after
            )
        chunks = response.aiter_raw()

        async def next_chunk() -> bytes | None:
            return await anext(chunks, None)

        loop = asyncio.get_running_loop()
        pending: asyncio.Future[bytes | None] | None = None
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(next_chunk())
                # Wake up every second: a client that went away (a SIGKILLed controller) must
                # release its upstream watch, or the proxy's connection pool runs dry.
                wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - loop.time()))
                done, _ = await asyncio.wait({pending}, timeout=wait)
                if pending in done:
                    chunk = pending.result()
                    pending = None
                    if chunk is None:
                        break
                    await out.write(chunk)
                    continue
                if deadline is not None and loop.time() >= deadline:
                    self.injected["watch-cut"] += 1
                    with contextlib.suppress(Exception):
                        if request.transport is not None:
                            request.transport.close()  # abrupt, as a lost connection would be
                    return
                if request.transport is None or request.transport.is_closing():
                    return
        finally:
            if pending is not None:
                pending.cancel()
        await out.write_eof()
