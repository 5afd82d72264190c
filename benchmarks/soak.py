"""Soak: 30 tenants created, reconciled to Active, resynced, and deleted. Prints figures.

The controller runs as a process with its webhook registered with the API server. Printed:
its RSS over time, API requests per tenant by verb, the webhook's p99 latency (direct
AdmissionReviews) at the start, with an empty cache, and at the end, with every tenant, and
where the machine's CPU went while the tenants were made Active (API server, etcd, the
controllers of the control plane, KWOK, ours, the load), with the least time that work could
take on this machine's cores.
Each tenant's maas-api pod runs on the node (devtools/node.py), which places pods by
their CPU requests (50m each for maas-api): a 2-core machine holds some 38 tenants. With
``--simulated-nodes [N]`` the pods run on N KWOK nodes instead (devtools/kwok.py; the real
node cordoned), and a thousand tenants fit: say ``--tenants 1000 --simulated-nodes``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import ssl
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

import httpx
import trustme
from devtools import audit, bench, kwok, peer, samples
from devtools.chaos import ControllerProcess, controller_args, wait_all
from devtools.cluster import free_port
from devtools.maas_api import FakeMaasApi
from devtools.node import cluster_with_node
from lightkube import AsyncClient, KubeConfig
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration

from aitenant import contract
from aitenant.resources import AITenant

AITENANT_NS, GATEWAY_NS, INFRA_NS = "ai-tenants", "gateways", "aitenant-system"


def print_cache_sizes(metrics_port: int) -> None:
    """The informers' caches, largest first: objects and packed JSON by kind and namespace."""
    values = bench.parse_metrics(bench.metrics_text(metrics_port))
    sizes = {
        name.split("{", 1)[1]: value
        for name, value in values.items()
        if name.startswith("aitenant_informer_bytes{")
    }
    total = sum(sizes.values())
    print(f"informer caches: {total / 1e6:.1f} MB of packed JSON in all; by kind:")
    for labels, size in sorted(sizes.items(), key=lambda item: -item[1]):
        count = values.get(f"aitenant_informer_objects{{{labels}", 0)
        print(f"  {labels.rstrip('}')}: {count:.0f} objects, {size / 1e3:.0f} kB")


def print_machine_cpu(spent: bench.CpuSpent, clients: Counter[str], tenants: int) -> None:
    """Where the machine's CPU went while the tenants were made Active, per tenant, the API
    requests each client sent meanwhile, and the least time that work takes on these cores."""
    cores = os.cpu_count() or 1
    shown = sorted(spent.by_process.items(), key=lambda item: -item[1])[:8]
    others = sum(spent.by_process.values()) - sum(cpu for _, cpu in shown)
    ended = spent.busy - spent.interrupts - sum(spent.by_process.values())

    def ms(cpu: float) -> str:
        return f"{cpu / tenants * 1000:.0f} ms"

    print(
        f"machine CPU while creating: {spent.busy:.0f} CPU-s in {spent.wall:.0f} s"
        f" ({spent.busy / spent.wall:.2f} of {cores} cores busy); per tenant: "
        + ", ".join(f"{name} {ms(cpu)}" for name, cpu in shown)
        + f", other processes {ms(others)}, processes that ended {ms(ended)}, interrupts"
        f" {ms(spent.interrupts)}; at {ms(spent.busy)} of CPU per tenant, {tenants} tenants"
        f" take at least {spent.busy / cores:.0f} s on {cores} cores",
        flush=True,
    )
    print(
        "API requests per tenant meanwhile, by client (watches left out): "
        + ", ".join(f"{client} {n / tenants:.1f}" for client, n in clients.most_common(10)),
        flush=True,
    )
    bench.record("soak_create_cpu_per_tenant_ms", spent.busy / tenants * 1000)
    for name, cpu in shown:
        bench.record(f"soak_create_cpu_per_tenant_ms_{name}", cpu / tenants * 1000)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def api_by_verb(port: int) -> dict[str, float]:
    return bench.api_by_verb(bench.parse_metrics(bench.metrics_text(port)))


def reconciles(port: int, controller: str) -> int:
    """Reconcile passes a controller has finished (any outcome)."""
    return bench.reconciles_by_controller(bench.parse_metrics(bench.metrics_text(port)))[controller]


def per_tenant(after: dict[str, float], before: dict[str, float], tenants: int) -> str:
    return bench.verbs_line(bench.by_verb_per_tenant(before, after, tenants))


async def webhook_p99(url: str, ca_file: Path, n: int = 400) -> float:
    ctx = ssl.create_default_context(cafile=str(ca_file))
    latencies = []
    async with httpx.AsyncClient(verify=ctx, timeout=30) as http:
        for i in range(n):
            started = time.perf_counter()
            resp = await http.post(
                url, content=samples.admission_review_body(f"probe-{i}", f"probe-gw-{i}")
            )
            latencies.append(time.perf_counter() - started)
            assert resp.status_code == 200
            assert resp.json()["response"]["allowed"], resp.text  # the path a create takes
    latencies.sort()
    return latencies[int(len(latencies) * 0.99)]


async def run(tenants: int, simulated_nodes: int) -> None:
    with (
        cluster_with_node(extra_users=[peer.CONTROLLER_USER], audit=True) as cluster,
        kwok.simulated_nodes(cluster, simulated_nodes),
    ):
        print(f"{tenants} tenants, {kwok.describe(simulated_nodes)}", flush=True)
        assert cluster.workdir is not None
        work = cluster.workdir
        client = AsyncClient(KubeConfig.from_file(cluster.kubeconfig), field_manager="soak")
        await samples.install_crds(client)
        for ns in (GATEWAY_NS, INFRA_NS):
            await samples.ensure_namespace(client, ns)
        prepare = getattr(samples, "ensure_db_secret", None)
        if prepare is not None:
            await prepare(client, INFRA_NS)
        maas_api = FakeMaasApi(work / "maas-api")
        await maas_api.start()
        ca = trustme.CA()
        cert_dir = work / "webhook"
        cert_dir.mkdir()
        cert = ca.issue_cert("127.0.0.1")
        cert.private_key_pem.write_to_path(str(cert_dir / "tls.key"))
        (cert_dir / "tls.crt").write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems))
        ca_file = work / "webhook-ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        webhook_port, metrics_port = free_port(), free_port()
        args = controller_args(
            gateway_ns=GATEWAY_NS,
            infra_ns=INFRA_NS,
            maas_api=maas_api,
            extra=[
                f"--webhook-port={webhook_port}",
                f"--webhook-cert-dir={cert_dir}",
                f"--metrics-port={metrics_port}",
                "--bind-address=127.0.0.1",
                "--log-level=warning",
            ],
        )
        # controller_args turns the webhook and metrics off; the later flags win.
        # A user of its own, so the audit log tells its requests from the benchmark's.
        controller = ControllerProcess(
            cluster.kubeconfig_for(peer.CONTROLLER_USER), work / "controller.log", args
        )
        requests = audit.Audit(cluster.audit_log, peer.CONTROLLER_USER.name)
        controller.start()
        assert controller.proc is not None
        samples_rss: list[tuple[float, float]] = []
        started = time.monotonic()

        async def sample_rss() -> None:
            while True:
                assert controller.proc is not None
                samples_rss.append((time.monotonic() - started, rss_mb(controller.proc.pid)))
                await asyncio.sleep(5)

        sampler = asyncio.create_task(sample_rss())
        url = f"https://127.0.0.1:{webhook_port}{contract.WEBHOOK_PATH}"
        try:
            await samples.wait_namespace(client, AITENANT_NS, 60)
            await bench.wait_listening(webhook_port)
            await bench.wait_listening(metrics_port)
            vwc = bench.webhook_configuration(
                name="aitenant-soak", ca_bundle_pem=ca.cert_pem.bytes(), url=url
            )
            await client.apply(
                cast(Any, ValidatingWebhookConfiguration.from_dict(vwc)),
                field_manager="soak",
                force=True,
            )
            p99_start = await webhook_p99(url, ca_file)
            before = api_by_verb(metrics_port)
            names = {f"soak-{i}" for i in range(tenants)}
            sem = asyncio.Semaphore(20)

            async def create(name: str) -> None:
                async with sem:
                    await samples.create_gateway(client, samples.gateway(name, GATEWAY_NS))
                    await samples.create_aitenant(client, samples.aitenant(name, AITENANT_NS))

            t0 = time.monotonic()
            machine = bench.MachineCpu({controller.proc.pid: "controller", os.getpid(): "load"})
            window_start = time.time()
            await asyncio.gather(*(create(n) for n in names))
            await wait_all(client, AITENANT_NS, names, gone=False, timeout=1800)
            print(f"{tenants} tenants Active after {time.monotonic() - t0:.0f} s", flush=True)
            bench.record("soak_active_s", time.monotonic() - t0)
            spent = machine.took()
            await asyncio.sleep(2)  # the audit log is written in batches
            clients = audit.requests_by_client(cluster.audit_log, (window_start, time.time() - 2))
            print_machine_cpu(spent, clients, tenants)
            bench.record("soak_rss_active_mb", rss_mb(controller.proc.pid))
            print_cache_sizes(metrics_port)
            p99_end = await webhook_p99(url, ca_file)
            bench.record("soak_webhook_direct_p99_ms", p99_end * 1000)
            created = api_by_verb(metrics_port)

            controller.stop()  # resync: a fresh process relists and reconciles every tenant
            await asyncio.sleep(2)  # the audit log is written in batches
            requests.take()
            t0 = time.monotonic()
            controller.start()
            while True:
                await asyncio.sleep(2)
                with contextlib.suppress(OSError):
                    if (
                        reconciles(metrics_port, "aitenant") >= tenants
                        and reconciles(metrics_port, "maastenantconfig") >= tenants
                    ):
                        break
            resync_seconds = time.monotonic() - t0
            await asyncio.sleep(5)  # anything the passes re-queued
            resync = api_by_verb(metrics_port)
            # The audit log names each write; a review (the start-up SelfSubjectReview: who am
            # I) stores nothing and is not one.
            written = Counter({key: n for key, n in requests.take().items() if audit.is_write(key)})
            writes = sum(written.values())
            bench.record("soak_resync_gets_per_tenant", resync.get("GET", 0) / tenants)
            bench.record("soak_resync_writes", writes)
            print(
                f"resync after restart: every tenant and config reconciled in "
                f"{resync_seconds:.0f} s; writes {writes:.0f}"
                f" ({audit.breakdown(written, 1) or 'none'}); API requests per tenant:"
                f" {per_tenant(resync, {}, tenants)}",
                flush=True,
            )

            before_delete = api_by_verb(metrics_port)
            t0 = time.monotonic()
            for name in names:
                await client.delete(AITenant, name, namespace=AITENANT_NS)
            await wait_all(client, AITENANT_NS, names, gone=True, timeout=1800)
            print(f"{tenants} tenants deleted after {time.monotonic() - t0:.0f} s", flush=True)
            deleted = api_by_verb(metrics_port)
            print(f"API requests per tenant, creation: {per_tenant(created, before, tenants)}")
            deletion = per_tenant(deleted, before_delete, tenants)
            print(f"API requests per tenant, deletion: {deletion}")
            print(
                f"webhook p99 (direct, sequential): {p99_start * 1000:.1f} ms with an empty "
                f"cache, {p99_end * 1000:.1f} ms with {tenants} tenants"
            )
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
            controller.stop()
            await maas_api.stop()
            await client.close()
        print(
            "controller RSS over time (s: MB): "
            + ", ".join(f"{t:.0f}: {m:.0f}" for t, m in samples_rss[::6])
        )
        print(f"peak RSS {max(m for _, m in samples_rss):.0f} MB")
        bench.record("soak_peak_rss_mb", max(m for _, m in samples_rss))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tenants", type=int, default=30)
    kwok.add_simulated_nodes_argument(parser)
    args = parser.parse_args()
    asyncio.run(run(args.tenants, args.simulated_nodes))


if __name__ == "__main__":
    main()
