"""The admission webhook under clients that connect, send most of a large body and stall
(docs/design.md §5): the controller, run as a process of its own so that its
memory can be read, keeps bounded memory, drops the stalled connections within seconds, and
answers the API server meanwhile."""

from __future__ import annotations

import asyncio
import os
import ssl
import statistics
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from devtools import images, samples
from devtools.bench import wait_listening
from devtools.cluster import LocalCluster, free_port
from devtools.maas_api import FakeMaasApi
from lightkube import AsyncClient
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration

from aitenant import contract
from aitenant.resources import AITenant

from ..harness import (
    AITENANT_NS,
    GATEWAY_NS,
    INFRA_NS,
    RunningController,
    WebhookTLS,
    controller_kubeconfig,
)
from ..tenants import Names
from .test_webhook import register, until_webhook_answers

pytestmark = pytest.mark.e2e

CONFIG_NAME = "aitenant-e2e-hostile"
HELD = 300
BODY = 4 * 1024 * 1024  # the webhook's cap; each client sends all but the last byte
CHUNK = b" " * (64 * 1024)
API_SERVER_TIMEOUT = 10.0  # timeoutSeconds of the webhook configuration
CLOSED_WITHIN = 20.0  # "within seconds": well under the 30 s a stalled client held before
GROWTH_BOUND_MIB = 400.0  # without the bounds: 1.4 GiB, and 365 MiB for 150


@dataclass
class ControllerProcess:
    proc: asyncio.subprocess.Process
    port: int
    log: Path

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")


@pytest.fixture
async def controller_process(
    cluster: LocalCluster,
    controller: RunningController,
    maas_api: FakeMaasApi,
    webhook_tls: WebhookTLS,
) -> AsyncIterator[ControllerProcess]:
    await controller.stop()  # the only controller while this test runs
    assert cluster.workdir is not None
    port = free_port()
    log = cluster.workdir / "controller-hostile.log"
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "aitenant",
            "--kubeconfig", str(controller_kubeconfig(cluster)),
            "--gateway-namespace", GATEWAY_NS,
            "--controller-namespace", INFRA_NS,
            "--enable-tenant-namespace-discovery",
            "--manage-default-tenant=false",
            f"--maas-api-url-template={maas_api.url_template}",
            f"--maas-api-ca-file={maas_api.ca_file}",
            f"--maas-api-ca-key-file={maas_api.ca_key_file}",
            "--bind-address=127.0.0.1",
            f"--webhook-port={port}",
            f"--webhook-cert-dir={webhook_tls.cert_dir}",
            "--metrics-port=0", "--health-port=0",
            *images.controller_flags(),
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(os.environ),
        )  # fmt: skip
    try:
        await wait_listening(port, timeout=60)
        yield ControllerProcess(proc, port, log)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 20)
        await controller.start()


async def stall(port: int, tls: ssl.SSLContext, sent_headers: asyncio.Event) -> float | None:
    """Send a webhook request's headers and all but one byte of its body, as fast as the server
    takes them, then stall; seconds from the headers until the server closed the connection
    (None: still open after 30 s)."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=tls, server_hostname="127.0.0.1"
    )
    writer.write(
        f"POST {contract.WEBHOOK_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {BODY}\r\n\r\n".encode()
    )
    started = time.monotonic()
    sent_headers.set()
    sent = 0
    try:
        while sent < BODY - 1:
            piece = CHUNK[: min(len(CHUNK), BODY - 1 - sent)]
            writer.write(piece)
            sent += len(piece)
            # A server that stops reading stalls us as well: that is as far as we get.
            await asyncio.wait_for(writer.drain(), 2)
    except (TimeoutError, ConnectionError, ssl.SSLError):
        pass
    try:
        while await asyncio.wait_for(reader.read(65536), 30 - (time.monotonic() - started)):
            pass  # an answer (there is none for a body never finished), then the close
    except TimeoutError:
        writer.transport.abort()
        return None
    except (ConnectionError, ssl.SSLError):
        pass
    writer.transport.abort()
    return time.monotonic() - started


async def test_held_connections_neither_exhaust_memory_nor_block_admission(
    kube: AsyncClient,
    webhook_tls: WebhookTLS,
    controller_process: ControllerProcess,
    unique: Names,
) -> None:
    port = controller_process.port
    await register(kube, webhook_tls, port, name=CONFIG_NAME)
    await until_webhook_answers(kube, unique("probe"))
    try:
        client_tls = ssl.create_default_context(cadata=webhook_tls.ca.cert_pem.bytes().decode())
        baseline = controller_process.rss_mib()
        peak = baseline
        stop_sampling = asyncio.Event()

        async def sample() -> None:
            nonlocal peak
            while not stop_sampling.is_set():
                peak = max(peak, controller_process.rss_mib())
                await asyncio.sleep(0.1)

        sampler = asyncio.create_task(sample())
        headers = [asyncio.Event() for _ in range(HELD)]
        held = [asyncio.create_task(stall(port, client_tls, sent)) for sent in headers]
        await asyncio.wait_for(asyncio.gather(*(sent.wait() for sent in headers)), 30)
        await asyncio.sleep(0.5)  # the bodies are flowing, or stalled

        name = unique("hostile")
        started = time.monotonic()
        await samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS))
        admitted_after = time.monotonic() - started

        closed = await asyncio.gather(*held)
        stop_sampling.set()
        await sampler
        await kube.delete(AITenant, name, namespace=AITENANT_NS)
    finally:
        await kube.delete(ValidatingWebhookConfiguration, CONFIG_NAME)

    times = [t for t in closed if t is not None]
    summary: dict[str, Any] = {
        "rss_baseline_mib": round(baseline, 1),
        "rss_peak_mib": round(peak, 1),
        "create_admitted_s": round(admitted_after, 2),
        "closed": f"{len(times)}/{HELD}",
        "closed_median_s": round(statistics.median(times), 2) if times else None,
        "closed_max_s": round(max(times), 2) if times else None,
    }
    print(f"\nwebhook under {HELD} stalled clients: {summary}")
    assert admitted_after < API_SERVER_TIMEOUT
    assert len(times) == HELD, f"{HELD - len(times)} stalled connections still open after 30 s"
    assert max(times) < CLOSED_WITHIN
    assert peak - baseline < GROWTH_BOUND_MIB
