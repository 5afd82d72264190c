"""Admission webhook latency with 10 and 1,000 AITenants in the cache. Prints figures.

For each cache size: AdmissionReviews sent by concurrent clients straight to the controller's
HTTPS endpoint (client-side p50/p99) and the handler's own time measured inside the server
(the ``aitenant_webhook_handler_seconds`` histogram; percentiles read from its buckets, so
they are upper bounds). Then the webhook is registered with the API server and sequential
AITenant creates through the API server are timed: first while the controller still works through
the 1,000 tenants' backlog, then once it is quiet, then the same without the webhook (what the API
server costs on its own). The load generator shares the 2 cores with the controller.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import httpx
import trustme
from devtools import bench, samples
from devtools.cluster import LocalCluster, free_port
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration

from aitenant import contract

AITENANT_NS = "ai-tenants"
GATEWAY_NS = "gateways"


def handler_buckets(text: str) -> list[tuple[float, float]]:
    out = []
    for line in text.splitlines():
        if line.startswith("aitenant_webhook_handler_seconds_bucket{"):
            le = line.split('le="')[1].split('"')[0]
            out.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    return out


def bucket_quantile(
    before: list[tuple[float, float]], after: list[tuple[float, float]], q: float
) -> float:
    counts = [(le, a - b) for (le, a), (_, b) in zip(after, before, strict=True)]
    total = counts[-1][1]
    for le, cumulative in counts:
        if cumulative >= q * total:
            return le
    return float("inf")


async def fire(url: str, ca: Path, total: int, concurrency: int) -> list[float]:
    ctx = ssl.create_default_context(cafile=str(ca))
    latencies: list[float] = []
    counter = iter(range(total))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(verify=ctx, limits=limits, timeout=30) as http:

        async def worker() -> None:
            for i in counter:
                body = samples.admission_review_body(f"bench-new-{i}", f"free-gw-{i}")
                started = time.perf_counter()
                resp = await http.post(url, content=body)
                latencies.append(time.perf_counter() - started)
                assert resp.status_code == 200, resp.text
                assert resp.json()["response"]["allowed"], resp.text

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


async def create_tenants(client: AsyncClient, start: int, stop: int) -> None:
    sem = asyncio.Semaphore(20)

    async def one(i: int) -> None:
        async with sem:
            await samples.create_aitenant(client, samples.aitenant(f"cached-{i}", AITENANT_NS))

    await asyncio.gather(*(one(i) for i in range(start, stop)))


async def time_creates(client: AsyncClient, prefix: str, count: int) -> list[float]:
    """Seconds each of ``count`` sequential AITenant creates took through the API server."""
    timings = []
    for i in range(count):
        started = time.perf_counter()
        try:
            await samples.create_aitenant(client, samples.aitenant(f"{prefix}-{i}", AITENANT_NS))
        except ApiError as exc:
            raise SystemExit(f"create through the API server failed: {exc}") from exc
        timings.append(time.perf_counter() - started)
    return timings


def report(what: str, timings: list[float]) -> None:
    print(
        f"create through the API server {what}: p50 {statistics.median(timings) * 1000:.1f} ms,"
        f" p99 {bench.percentile(timings, 0.99) * 1000:.1f} ms"
    )


async def run(requests: int, concurrency: int, api_creates: int) -> None:
    with LocalCluster() as cluster:
        assert cluster.workdir is not None
        client = AsyncClient(KubeConfig.from_file(cluster.kubeconfig), field_manager="bench")
        await samples.install_crds(client)
        await samples.ensure_namespace(client, GATEWAY_NS)
        await samples.ensure_namespace(client, AITENANT_NS)
        ca = trustme.CA()
        cert_dir = cluster.workdir / "webhook"
        cert_dir.mkdir()
        cert = ca.issue_cert("127.0.0.1")
        cert.private_key_pem.write_to_path(str(cert_dir / "tls.key"))
        (cert_dir / "tls.crt").write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems))
        ca_file = cluster.workdir / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        webhook_port, metrics_port = free_port(), free_port()
        log = (cluster.workdir / "controller.log").open("ab")
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "aitenant",
                "--kubeconfig", str(cluster.kubeconfig),
                "--gateway-namespace", GATEWAY_NS,
                "--controller-namespace", "default",
                "--manage-default-tenant=false",
                "--bind-address=127.0.0.1",
                f"--webhook-port={webhook_port}",
                f"--webhook-cert-dir={cert_dir}",
                f"--metrics-port={metrics_port}",
                "--health-port=0",
                "--log-level=error",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **bench.controller_env()},
        )  # fmt: skip
        url = f"https://127.0.0.1:{webhook_port}{contract.WEBHOOK_PATH}"
        try:
            await bench.wait_listening(metrics_port)
            await bench.wait_listening(webhook_port)
            created = 0
            for size in (10, 1000):
                await create_tenants(client, created, size)
                created = size
                await asyncio.sleep(3)  # let the informer see them
                await fire(url, ca_file, 500, concurrency)  # warm up
                before = handler_buckets(bench.metrics_text(metrics_port))
                started = time.perf_counter()
                latencies = await fire(url, ca_file, requests, concurrency)
                elapsed = time.perf_counter() - started
                after = handler_buckets(bench.metrics_text(metrics_port))
                print(
                    f"{size} tenants cached: {requests} reviews by {concurrency} clients in "
                    f"{elapsed:.1f} s ({requests / elapsed:.0f}/s); client p50 "
                    f"{statistics.median(latencies) * 1000:.1f} ms, p99 "
                    f"{bench.percentile(latencies, 0.99) * 1000:.1f} ms; handler in-server p50 <= "
                    f"{bucket_quantile(before, after, 0.5) * 1000:.2f} ms, p99 <= "
                    f"{bucket_quantile(before, after, 0.99) * 1000:.2f} ms"
                )

            body = bench.webhook_configuration(
                name="aitenant-bench", ca_bundle_pem=ca.cert_pem.bytes(), url=url
            )
            vwc = cast(Any, ValidatingWebhookConfiguration.from_dict(body))
            await client.apply(vwc, field_manager="bench", force=True)
            await asyncio.sleep(2)
            # While the controller still works through the 1,000 tenants' backlog: the API
            # server and the controller compete for the 2 cores with the creates.
            busy = await time_creates(client, "via-api-busy", api_creates)
            report(f"with the webhook, {api_creates} sequential, backlog still running", busy)
            bench.record("webhook_api_busy_p99_ms", bench.percentile(busy, 0.99) * 1000)
            waited = await asyncio.to_thread(bench.wait_until_quiet, metrics_port)
            print(f"controller quiet {waited:.0f} s later")
            calls_before = bench.webhook_calls(cluster.kubeconfig)
            quiet = await time_creates(client, "via-api", api_creates)
            report(f"with the webhook, {api_creates} sequential, controller quiet", quiet)
            count, total, fast = bench.webhook_calls(cluster.kubeconfig) - calls_before
            print(
                f"the API server's own timing of those {count:.0f} webhook calls: mean "
                f"{total / count * 1000:.1f} ms, {fast / count:.0%} within 5 ms"
            )
            bench.record("webhook_api_call_mean_ms", total / count * 1000)
            bench.record("webhook_api_p99_ms", bench.percentile(quiet, 0.99) * 1000)
            # The same creates without the webhook: what the API server costs on its own.
            await client.delete(ValidatingWebhookConfiguration, "aitenant-bench")
            await asyncio.sleep(2)
            await asyncio.to_thread(bench.wait_until_quiet, metrics_port)
            plain = await time_creates(client, "no-webhook", api_creates)
            report(f"without the webhook, {api_creates} sequential, controller quiet", plain)
            bench.record("api_create_p99_ms", bench.percentile(plain, 0.99) * 1000)
        finally:
            proc.terminate()
            proc.wait(timeout=20)
            await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--api-creates", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(run(args.requests, args.concurrency, args.api_creates))


if __name__ == "__main__":
    main()
