"""Plain-HTTP endpoints every replica serves: /healthz, /readyz and /metrics."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from aitenant.runtime.serving.metrics import Metrics

ReadyCheck = Callable[[], str | None]  # None when ready, else why not
LiveCheck = Callable[[], str | None]  # None while alive, else what died


def health_app(
    ready_checks: list[ReadyCheck], live_checks: list[LiveCheck] | None = None
) -> web.Application:
    """``/healthz`` fails (500) once a live check names something dead, such as the webhook's
    thread, so that the supervisor restarts the process; ``/readyz`` is 503 until ready."""
    alive = live_checks if live_checks is not None else []

    async def healthz(_: web.Request) -> web.Response:
        problems = [p for check in alive if (p := check())]
        if problems:
            return web.Response(status=500, text="; ".join(problems))
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        problems = [p for check in ready_checks if (p := check())]
        if problems:
            return web.Response(status=503, text="; ".join(problems))
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


def metrics_app(metrics: Metrics) -> web.Application:
    async def render(_: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.router.add_get("/metrics", render)
    return app


async def serve(app: web.Application, host: str, port: int, **kwargs: object) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, **kwargs)  # type: ignore[arg-type]
    await site.start()
    return runner
