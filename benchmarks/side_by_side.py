"""Speed side by side: our controller, then a peer, each on a fresh local control plane of the
same build, under the same load. Prints one table of figures as measured; never fails on a time.

Usage: ``python -m benchmarks.side_by_side [--peer-command '<shell command>'] [--peer-crds DIR]``
(the environment the command gets: ``devtools/peer.py``, ``benchmarks/README.md``;
``AITENANT_PEER_COMMAND`` and ``AITENANT_PEER_CRDS`` may be used instead of the flags). Without a
peer it measures ours only and says how to add one. Smaller sizes for a quick run:
``--sequential 10 --burst 20 --tenants 60 --delete 25 --lifecycles 3 --webhook-creates 100``.

Each controller starts from the same shell-command environment, on a cluster prepared the same
way (``peer.prepare``; one node, whose kubelet makes each Deployment Available, whoever made it).
With ``--simulated-nodes [N]`` both run their pods on N KWOK nodes beside the cordoned real
node (``devtools/kwok.py``): the real scheduler and deployment controller, no container; the
sizes past the real node's ~38 pods then give Ready platforms, and the output says so.
``--plot FILE.png`` draws tenants Ready over time (steps 3 to 5) and the API requests per
tenant lifecycle of each controller (``benchmarks/side_by_side_plot.py``).
Every AITenant has a Gateway of its own name and carries
``maas.opendatahub.io/api-keys-revoked=true`` from its creation (no revocation Job or maas-api
runs here). One watch on the AITenants times every step. In order:

1. Start: one AITenant waits for the controller; process start to the first status written on
   it (its first reconcile), and the controller's CPU time until then.
2. Lifecycles: ``--lifecycles`` tenants, one at a time, created, Ready, deleted, gone. Per
   tenant: the controller's API requests in that window (the audit log, user ``controller``,
   watches left out), the writes among them, and the CPU time of the API server and of the
   controller (``/proc``; the controller's is that of the command's process session).
3. Sequential: ``--sequential`` tenants created one after another, each waited for until
   Ready: create-to-Ready p50 and p99.
4. Burst: ``--burst`` tenants created at once: until all are Ready.
5. Scale: more tenants, 20 in flight, until ``--tenants`` exist, all Ready. The CPU time of
   the API server and of the controller per tenant created over steps 3 to 5; the controller's
   peak RSS (VmHWM) at that count.
6. Deletion: ``--delete`` of them deleted at once: until all are gone.
7. Webhook: a ValidatingWebhookConfiguration for AITenants pointing at the controller's
   webhook (rendered by our template; the same for both but for the URL; the peer's at
   ``https://127.0.0.1:--peer-webhook-port`` + the AITenant webhook path, controller-runtime's
   default port, with the serving certificate in ``$TMPDIR``), then ``--webhook-creates``
   dry-run AITenant creates through the API server, one after another (each admitted, nothing
   stored): p50 and p99; then the same creates without the configuration (what the API server
   costs on its own).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import shlex
import statistics
import tempfile
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from benchmarks.tenant_load import (
    IN_FLIGHT,
    Tenants,
    create_gateways,
    create_tenants,
    deadline_for,
    delete_tenants,
    tenant_body,
)
from devtools import audit, bench, kwok, peer, samples
from devtools.cluster import LocalCluster, free_port, kube_bin_dir
from devtools.maas_api import FakeMaasApi
from devtools.node import cluster_with_node
from lightkube import AsyncClient, KubeConfig
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration

from aitenant import contract
from aitenant.resources import AITenant

REPO = Path(__file__).resolve().parent.parent
WEBHOOK_CONFIG = "side-by-side"
Figures = dict[str, float | None]


@dataclass(frozen=True)
class Sizes:
    sequential: int = 50
    burst: int = 200
    tenants: int = 1000
    delete: int = 250
    lifecycles: int = 10
    webhook_creates: int = 200

    @property
    def created(self) -> int:
        """Tenants created in steps 3 to 5 (one more exists from step 1)."""
        return self.sequential + self.burst + self.rest

    @property
    def rest(self) -> int:
        return max(0, self.tenants - 1 - self.sequential - self.burst)

    @property
    def deleted(self) -> int:
        """Tenants deleted at once in step 6 (some of those created in steps 3 to 5)."""
        return min(self.delete, self.created)

    @property
    def standing(self) -> int:
        """Tenants that exist at the end of step 5."""
        return 1 + self.created


# (figure, label); the labels' fields come from Sizes.
LABELS: list[tuple[str, str]] = [
    ("create_p50_ms", "create-to-Ready p50, {sequential} one after another (ms)"),
    ("create_p99_ms", "create-to-Ready p99, {sequential} one after another (ms)"),
    ("burst_s", "{burst} created at once, all Ready (s)"),
    ("lifecycle_requests", "API requests per tenant lifecycle (create, Ready, delete, gone)"),
    ("lifecycle_writes", "API writes per tenant lifecycle"),
    ("lifecycle_apiserver_cpu_ms", "API-server CPU per tenant lifecycle (ms)"),
    ("lifecycle_controller_cpu_ms", "controller CPU per tenant lifecycle (ms)"),
    ("create_apiserver_cpu_ms", "API-server CPU per tenant, creating {created} (ms)"),
    ("create_controller_cpu_ms", "controller CPU per tenant, creating {created} (ms)"),
    ("peak_rss_mb", "controller peak RSS at {standing} tenants (MB)"),
    ("first_reconcile_s", "process start to first reconcile (s)"),
    ("first_reconcile_cpu_s", "controller CPU from start to first reconcile (s)"),
    ("delete_s", "{deleted} deleted at once, all gone (s)"),
    ("webhook_p50_ms", "create through the API server with the webhook, p50 (ms)"),
    ("webhook_p99_ms", "create through the API server with the webhook, p99 (ms)"),
    ("webhook_call_mean_ms", "webhook call as the API server timed it, mean (ms)"),
    ("no_webhook_p99_ms", "the same creates without the webhook, p99 (ms)"),
]


def table(results: dict[str, Figures], sizes: Sizes) -> str:
    """One row per figure, one column per controller, in the order of ``results``."""
    fields = {
        name: getattr(sizes, name)
        for name in ("sequential", "burst", "created", "deleted", "standing")
    }
    labels = {
        key: label.format(**{k: f"{v:,}" for k, v in fields.items()}) for key, label in LABELS
    }
    rows = [[labels[key], *(figures.get(key) for figures in results.values())] for key, _ in LABELS]
    return bench.markdown_table(["figure", *results], rows)


@dataclass
class Run:
    """One controller on its own control plane, and the figures it gave."""

    name: str
    cluster: LocalCluster
    client: AsyncClient
    controller: peer.ControllerUnderTest
    tenants: Tenants
    audit_log: audit.Audit
    figures: Figures = field(default_factory=dict)
    # Seconds from the first create of step 3 to each tenant of steps 3 to 5 turning Ready,
    # in order (the plot's curve).
    ready_s: list[float] = field(default_factory=list)

    def say(self, line: str) -> None:
        print(f"{self.name}: {line}", flush=True)

    def alive(self) -> None:
        """Raise if the controller's process has ended."""
        proc = self.controller.proc
        if proc is not None and proc.poll() is not None:
            tail = self.controller.log.read_text(errors="replace")[-1500:]
            raise RuntimeError(f"the controller exited with {proc.returncode}:\n{tail}")

    async def until(self, state: str, names: Collection[str], timeout: float) -> None:
        await self.tenants.until(state, names, timeout, self.alive)

    def cpu(self) -> tuple[float, float]:
        """CPU seconds so far: the API server's, the controller's."""
        apiserver = bench.process_cpu_seconds(self.cluster.pid("kube-apiserver"))
        return apiserver, self.controller.cpu_seconds()

    async def start(self, webhook_port: int) -> None:
        await create_gateways(self.client, ["first"])
        await create_tenants(self.client, ["first"], None)
        for attempt in range(3):
            await peer.port_free(webhook_port, 600)
            self.controller.start()
            try:
                await self.until("status", ["first"], 180)
                break
            except RuntimeError:  # it exited: another process took the port meanwhile?
                if attempt == 2 or "address already in use" not in self.controller.log.read_text():
                    raise
                self.say(f"port {webhook_port} was taken as it started; starting it again")
        cpu = self.controller.cpu_seconds()
        took = self.tenants.status_at["first"] - self.controller.started_at
        self.figures |= {"first_reconcile_s": took, "first_reconcile_cpu_s": cpu}
        await self.controller.wait_ready()
        await self.until("ready", ["first"], 180)
        self.say(f"first reconcile {took:.2f} s after the process started, {cpu:.2f} CPU s")

    async def lifecycles(self, count: int) -> None:
        if count <= 0:
            return
        names = [f"life-{i}" for i in range(count)]
        await create_gateways(self.client, names)
        await asyncio.sleep(1)
        started, cpu_before = time.time(), self.cpu()
        for name in names:
            await create_tenants(self.client, [name], None)
            await self.until("ready", [name], deadline_for(1))
            await delete_tenants(self.client, [name])
            await self.until("gone", [name], deadline_for(1))
        ended, cpu_after = time.time(), self.cpu()
        await asyncio.sleep(2)  # the audit log is written in batches
        requests = self.audit_log.take(window=(started, ended))
        total = sum(requests.values())
        self.figures |= {
            "lifecycle_requests": total / count,
            "lifecycle_writes": audit.writes(requests) / count,
            "lifecycle_apiserver_cpu_ms": (cpu_after[0] - cpu_before[0]) / count * 1000,
            "lifecycle_controller_cpu_ms": (cpu_after[1] - cpu_before[1]) / count * 1000,
        }
        self.say(
            f"{count} lifecycles in {ended - started:.1f} s, {total / count:.1f} requests each:"
            f" {audit.breakdown(requests, count)}"
        )

    async def creates(self, sizes: Sizes) -> list[str]:
        """Steps 3 to 5; the names created, newest first."""
        sequential = [f"seq-{i}" for i in range(sizes.sequential)]
        burst = [f"burst-{i}" for i in range(sizes.burst)]
        rest = [f"scale-{i}" for i in range(sizes.rest)]
        await create_gateways(self.client, sequential + burst)
        await asyncio.sleep(1)
        cpu_before = self.cpu()
        first_create = time.time()

        latencies = []
        for name in sequential:
            started = time.time()
            await create_tenants(self.client, [name], None)
            await self.until("ready", [name], deadline_for(1))
            latencies.append(self.tenants.ready_at[name] - started)
        if latencies:
            p50, p99 = statistics.median(latencies), bench.percentile(latencies, 0.99)
            self.figures |= {"create_p50_ms": p50 * 1000, "create_p99_ms": p99 * 1000}
            self.say(
                f"{len(latencies)} one after another: create-to-Ready p50 {p50 * 1000:.0f} ms,"
                f" p99 {p99 * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
            )

        if burst:
            started = time.time()
            await create_tenants(self.client, burst, None)
            await self.until("ready", burst, deadline_for(len(burst)))
            took = max(self.tenants.ready_at[n] for n in burst) - started
            self.figures["burst_s"] = took
            self.say(f"{len(burst)} created at once, all Ready after {took:.1f} s")

        if rest:
            started = time.time()
            await create_gateways(self.client, rest)
            await create_tenants(self.client, rest, IN_FLIGHT)
            await self.until("ready", rest, deadline_for(len(rest)))
            self.say(f"{len(rest)} more, {IN_FLIGHT} in flight, all Ready after "
                     f"{time.time() - started:.1f} s")  # fmt: skip
        cpu_after = self.cpu()
        created = len(sequential) + len(burst) + len(rest)
        ready = self.tenants.ready_at
        self.ready_s = sorted(ready[n] - first_create for n in sequential + burst + rest)
        if created:
            self.figures |= {
                "create_apiserver_cpu_ms": (cpu_after[0] - cpu_before[0]) / created * 1000,
                "create_controller_cpu_ms": (cpu_after[1] - cpu_before[1]) / created * 1000,
            }
        await asyncio.sleep(5)  # what it does next with them all there
        self.figures["peak_rss_mb"] = self.controller.peak_rss_mb()
        self.say(
            f"{created + 1} tenants: peak RSS {self.figures['peak_rss_mb']:.0f} MB; CPU per tenant"
            f" created: API server {self.figures.get('create_apiserver_cpu_ms', 0):.0f} ms,"
            f" controller {self.figures.get('create_controller_cpu_ms', 0):.0f} ms"
        )
        return rest[::-1] + burst[::-1] + sequential[::-1]

    async def deletion(self, names: list[str]) -> None:
        if not names:
            return
        started = time.time()
        await delete_tenants(self.client, names)
        await self.until("gone", names, deadline_for(len(names)))
        took = max(self.tenants.gone_at[n] for n in names) - started
        self.figures["delete_s"] = took
        self.say(f"{len(names)} deleted at once, all gone after {took:.1f} s")

    async def webhook(self, url: str, count: int) -> None:
        if count <= 0:
            return
        certs = self.controller.tmpdir / "k8s-webhook-server" / "serving-certs"
        ca = (certs / "ca.crt").read_bytes()
        body = bench.webhook_configuration(name=WEBHOOK_CONFIG, ca_bundle_pem=ca, url=url)
        vwc = cast(Any, ValidatingWebhookConfiguration.from_dict(body))
        await self.client.apply(vwc, field_manager="side-by-side", force=True)
        await asyncio.sleep(2)  # the API server picks the configuration up
        await self.dry_run_creates("warm", 5)
        kubectl = str(kube_bin_dir() / "kubectl")
        calls_before = await asyncio.to_thread(
            bench.webhook_calls, self.cluster.kubeconfig, kubectl
        )
        with_webhook = await self.dry_run_creates("admitted", count)
        calls = await asyncio.to_thread(bench.webhook_calls, self.cluster.kubeconfig, kubectl)
        calls -= calls_before
        await self.client.delete(ValidatingWebhookConfiguration, WEBHOOK_CONFIG)
        await asyncio.sleep(2)
        without = await self.dry_run_creates("plain", count)
        p50, p99 = statistics.median(with_webhook), bench.percentile(with_webhook, 0.99)
        plain = bench.percentile(without, 0.99)
        self.figures |= {
            "webhook_p50_ms": p50 * 1000,
            "webhook_p99_ms": p99 * 1000,
            "no_webhook_p99_ms": plain * 1000,
        }
        if calls.calls:
            self.figures["webhook_call_mean_ms"] = calls.seconds / calls.calls * 1000
        self.say(
            f"{count} dry-run creates through the API server: with the webhook p50"
            f" {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms ({calls.calls:.0f} webhook calls,"
            f" mean {self.figures.get('webhook_call_mean_ms', float('nan')):.1f} ms as the API"
            f" server timed them); without it p99 {plain * 1000:.1f} ms"
        )

    async def dry_run_creates(self, prefix: str, count: int) -> list[float]:
        timings = []
        for i in range(count):
            resource = AITenant.from_dict(tenant_body(f"{prefix}-{i}"))
            started = time.perf_counter()
            await self.client.create(resource, dry_run=True)
            timings.append(time.perf_counter() - started)
        return timings


@dataclass(frozen=True)
class Setup:
    """The sizes, and how many simulated nodes both controllers run on (0: the real one)."""

    sizes: Sizes
    simulated_nodes: int = 0


async def measure(
    name: str,
    command: Callable[[Path], str],
    peer_crds: Path | None,
    webhook_port: int,
    setup: Setup,
) -> Run:
    """Every figure of one controller (``command`` of the cluster's working folder) on a fresh
    control plane; a step that fails ends the run (its figures and the later ones stay
    empty)."""
    sizes = setup.sizes
    with (
        cluster_with_node(extra_users=[peer.CONTROLLER_USER], audit=True) as cluster,
        kwok.simulated_nodes(cluster, setup.simulated_nodes),
    ):
        assert cluster.workdir is not None
        client = AsyncClient(KubeConfig.from_file(cluster.kubeconfig), field_manager="side-by-side")
        await peer.prepare(client, cluster.workdir, peer_crds)
        version = (await samples.server_version(client)).get("gitVersion")
        controller = peer.ControllerUnderTest(
            name,
            command(cluster.workdir),
            cluster.kubeconfig_for(peer.CONTROLLER_USER),
            cluster.workdir,
        )
        run = Run(
            name,
            cluster,
            client,
            controller,
            Tenants(client),
            audit.Audit(cluster.audit_log, peer.CONTROLLER_USER.name),
        )
        run.say(f"Kubernetes {version}, {kube_bin_dir()}; log {controller.log}")
        run.say(kwok.describe(setup.simulated_nodes))
        tasks = [asyncio.create_task(run.tenants.run())]
        url = f"https://127.0.0.1:{webhook_port}{contract.WEBHOOK_PATH}"
        try:
            await run.start(webhook_port)
            await run.lifecycles(sizes.lifecycles)
            created = await run.creates(sizes)
            await run.deletion(created[: sizes.delete])
            await run.webhook(url, sizes.webhook_creates)
        except Exception as exc:
            run.say(f"stopped: {type(exc).__name__}: {exc}")
        finally:
            controller.stop()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await client.close()
        return run


async def main(args: argparse.Namespace) -> None:
    sizes = Sizes(
        args.sequential,
        args.burst,
        args.tenants,
        args.delete,
        args.lifecycles,
        args.webhook_creates,
    )
    setup = Setup(sizes, args.simulated_nodes)
    bench.precompile([REPO / "src"])  # ours starts from bytecode, as from the image
    runs: dict[str, Run] = {}
    ours_port = free_port()

    # Ours revokes a new tenant's stale keys at its maas-api before Active (docs/contract.md
    # §5.2), unreachable from the host: a stand-in on loopback answers. Its CA signs the
    # maas-api serving certificates (docs/differences.md D9).
    maas_api = FakeMaasApi(Path(tempfile.mkdtemp(prefix="side-by-side-maas-api-")))
    await maas_api.start()

    def ours(_: Path) -> str:
        webhook = "--webhook-cert-dir $TMPDIR/k8s-webhook-server/serving-certs"
        maas = f"--maas-api-url-template {shlex.quote(maas_api.url_template)}"
        extra = f"--webhook-port {ours_port} {webhook} {maas}"
        return peer.our_command(maas_api.ca_file, maas_api.ca_key_file, extra)

    try:
        runs["ours"] = await measure("ours", ours, None, ours_port, setup)
    finally:
        await maas_api.stop()
    if args.peer_command:
        command = args.peer_command
        runs["peer"] = await measure(
            "peer", lambda _: command, args.peer_crds, args.peer_webhook_port, setup
        )
    results = {name: run.figures for name, run in runs.items()}
    ready = {name: run.ready_s for name, run in runs.items()}
    where = kwok.describe(setup.simulated_nodes)
    if args.json:
        figures = {"sizes": dataclasses.asdict(sizes), "where": where, "figures": results}
        args.json.write_text(json.dumps(figures | {"ready_s": ready}, indent=1))
    if args.plot:
        from benchmarks import side_by_side_plot  # matplotlib: the `bench` group only

        requests = {name: f.get("lifecycle_requests") for name, f in results.items()}
        side_by_side_plot.write(args.plot, ready, requests, f"{sizes.standing:,} tenants; {where}")
        print(f"plot written to {args.plot}")
    print()
    print(f"Where the pods ran: {where}.")
    print(table(results, sizes))
    if not args.peer_command:
        print(f"\nno peer: {peer.HOW_TO_RUN}")


def cli() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--peer-command", default=os.environ.get(peer.PEER_COMMAND_ENV))
    parser.add_argument("--peer-crds", type=Path, default=os.environ.get(peer.PEER_CRDS_ENV))
    parser.add_argument(
        "--peer-webhook-port",
        type=int,
        default=contract.DEFAULT_WEBHOOK_PORT,
        help="where the peer serves the AITenant webhook on 127.0.0.1 (controller-runtime: 9443)",
    )
    parser.add_argument("--sequential", type=int, default=Sizes.sequential)
    parser.add_argument("--burst", type=int, default=Sizes.burst)
    parser.add_argument(
        "--tenants", type=int, default=Sizes.tenants, help="tenants standing for the peak RSS"
    )
    parser.add_argument("--delete", type=int, default=Sizes.delete)
    parser.add_argument("--lifecycles", type=int, default=Sizes.lifecycles)
    parser.add_argument("--webhook-creates", type=int, default=Sizes.webhook_creates)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    kwok.add_simulated_nodes_argument(parser)
    parser.add_argument(
        "--plot", type=Path, help="write a PNG: tenants Ready over time, API requests per tenant"
    )
    asyncio.run(main(parser.parse_args()))


if __name__ == "__main__":
    cli()
