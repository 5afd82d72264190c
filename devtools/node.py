"""One node for a ``LocalCluster``: kube-scheduler, containerd, a kubelet, CNI and kube-proxy.

Run where ``AITENANT_NODE=1`` (``scripts/dev test`` sets it;
tests/e2e/test_platform_runs.py). Needs root, Debian's
``containerd``, ``runc``, ``containernetworking-plugins`` and ``nftables`` (``scripts/dev``
installs them), and the node binaries of ``scripts/build-node.sh``.

Network safety: every address a pod or a Service gets is routed to a bridge of ours before
anything runs. The node's address (the kubelet's ``--node-ip``, what kube-proxy needs to
program anything) is the bridge's own; pods get theirs on that bridge from the bridge CNI
plugin with host-local addresses; the Service range is routed to the bridge too, so a
ClusterIP that no kube-proxy rule translates stays on this machine. Forwarding is enabled on
that bridge only, and an nftables table of ours drops whatever would be forwarded from it to
any other device. Pods resolve Service names through a DNS responder of ours on the node's
address that answers only ``<service>.<namespace>.svc.cluster.local`` and never forwards.

``cluster_with_node`` also enforces NetworkPolicies on the node (kube-router's firewall:
devtools/netpol.py); the demo and the Juju cluster, which start a ``Node`` themselves, do not.

``stop()`` stops exactly the processes it started (by pid) and removes the containers,
mounts, network namespaces, routes, bridge, nftables table and cgroups it made, and puts back
the kernel settings the kubelet changes at start.

The node's addresses and rendered configuration files: devtools/node_config.py; its changes
to this machine's network and their undoing: devtools/node_host.py; its DNS responder:
devtools/node_dns.py. This module runs the processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from devtools import images
from devtools import node_host as host
from devtools.cluster import (
    REPO_ROOT,
    LocalCluster,
    built_by,
    free_port,
    terminate_group,
    wait_or_kill_group,
)
from devtools.forwarder import Forwarder
from devtools.netpol import USER as FIREWALL_USER
from devtools.netpol import Firewall
from devtools.node_config import (
    NODE_IP,
    NODE_NAME,
    POD_CIDR,
    containerd_config,
    containerd_proxy_env,
    kube_proxy_config,
    kubelet_config,
)
from devtools.node_dns import ServiceDNS
from devtools.node_host import RUN_CONTAINERD, iptables_chains, nft_tables, quiet
from devtools.postgres import Postgres

# The names other modules import from here (the node's address and name live in
# devtools/node_config.py; importers keep one place to reach the node from).
__all__ = ["NODE_CONTROLLERS", "NODE_IP", "NODE_NAME", "Node", "cluster_with_node"]

BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-node.sh"
# Controllers a node needs beside the namespace and garbage-collector ones: Deployments,
# CronJobs and Jobs make pods; nodelifecycle lifts the not-ready taint the kubelet registers
# with; endpointslice feeds kube-proxy.
NODE_CONTROLLERS = (
    "namespace,garbagecollector,deployment,replicaset,job,cronjob,endpointslice,"
    "endpointslicemirroring,nodelifecycle,podgc,serviceaccount"
)
LOCK_FILE = Path("/run/aitenant-node.lock")


def node_bin_dir() -> Path:
    return built_by(BUILD_SCRIPT)


@dataclass
class Node:
    """The node of ``cluster``; ``start()`` after the cluster's, ``stop()`` before it."""

    cluster: LocalCluster
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _undo: list[tuple[str, ...]] = field(default_factory=list)
    _sysctls: dict[str, str] = field(default_factory=dict)
    _netns_before: set[str] = field(default_factory=set)
    _cgroups_before: set[Path] = field(default_factory=set)
    _tables_before: set[str] = field(default_factory=set)
    _chains_before: set[tuple[str, str, str]] = field(default_factory=set)
    _rules_recorded: bool = False
    _run_containerd_before: bool = True
    _lock: IO[str] | None = None
    _dns: ServiceDNS | None = None
    _database: Postgres | None = None
    _api_forwarder: Forwarder | None = None

    @property
    def work(self) -> Path:
        assert self.cluster.workdir is not None
        return self.cluster.workdir / "node"

    @property
    def containerd_socket(self) -> Path:
        return self.work / "containerd" / "containerd.sock"

    @property
    def logs(self) -> Path:
        assert self.cluster.workdir is not None
        return self.cluster.workdir / "logs"

    def start(self, timeout: float = 120.0) -> None:
        if os.geteuid() != 0:
            raise RuntimeError("a node needs root (containerd, network devices, cgroups)")
        bins = node_bin_dir()
        self.work.mkdir(parents=True, exist_ok=True)
        LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
        self._lock = LOCK_FILE.open("w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            self._lock = None
            raise RuntimeError(
                f"another node of this suite runs on this machine ({LOCK_FILE} is locked): "
                "its bridge, routes and nftables tables would clash"
            ) from None
        try:
            self._start(bins, timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, bins: Path, timeout: float) -> None:
        began = time.monotonic()
        self._netns_before = host.netns_names()
        self._cgroups_before = host.kubepods_cgroups()
        self._tables_before = nft_tables()
        # containerd 1.6 puts its shims' sockets under /run/containerd/s whatever its state
        # directory: removed at stop when it was not there before.
        self._run_containerd_before = RUN_CONTAINERD.exists()
        self._chains_before = iptables_chains()
        self._rules_recorded = True
        self._sysctls.update(host.read_sysctls())
        host.add_network(self.work, self._undo)
        if self.cluster.pods_reach_at is not None:
            port = self.cluster.api_port
            self._api_forwarder = Forwarder((NODE_IP, port), ("127.0.0.1", port))
            self._api_forwarder.start()
        if images.runs_real_maas_api():
            self._database = Postgres(NODE_IP, POD_CIDR, self.logs / "postgres.log")
            self._database.start()
        archives = images.build_archives(self.work / "images")
        self._containerd()
        images.import_archives(self.containerd_socket, archives)
        kubeconfig = str(self.cluster.kubeconfig)
        self._spawn(
            "kube-scheduler",
            [
                str(bins / "kube-scheduler"),
                "--kubeconfig",
                kubeconfig,
                "--leader-elect=false",
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                str(free_port()),
            ],
        )
        self._dns = ServiceDNS(NODE_IP, ["kubectl", "--kubeconfig", kubeconfig])
        threading.Thread(target=self._dns.serve_forever, daemon=True).start()
        self._kubelet(bins, kubeconfig)
        self._kube_proxy(bins, kubeconfig)
        self._wait_ready(began + timeout)

    # -- processes -------------------------------------------------------------------------
    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        with (self.logs / f"{name}.log").open("ab") as log:
            self._procs[name] = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )

    def _containerd(self) -> None:
        base = self.work / "containerd"
        base.mkdir(parents=True, exist_ok=True)
        (base / "config.toml").write_text(
            containerd_config(base, self.containerd_socket, self.work)
        )
        self._spawn(
            "containerd",
            ["containerd", "--config", str(base / "config.toml")],
            env=containerd_proxy_env(),
        )
        deadline = time.monotonic() + 30
        while not self.containerd_socket.exists():
            self._check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError("containerd did not open its socket within 30 s")
            time.sleep(0.1)

    def _kubelet(self, bins: Path, kubeconfig: str) -> None:
        root = self.work / "kubelet"
        root.mkdir(parents=True, exist_ok=True)
        resolv = self.work / "resolv.conf"
        # The pods' only resolver is ours (ClusterFirst pods get clusterDNS); nothing of this
        # machine's resolver configuration reaches them.
        resolv.write_text(f"nameserver {NODE_IP}\n")
        config = kubelet_config(self.work, self.containerd_socket, resolv)
        (self.work / "kubelet.yaml").write_text(yaml.safe_dump(config))
        self._spawn(
            "kubelet",
            [
                str(bins / "kubelet"),
                "--config",
                str(self.work / "kubelet.yaml"),
                "--kubeconfig",
                kubeconfig,
                "--root-dir",
                str(root),
                "--cert-dir",
                str(root / "pki"),
                "--hostname-override",
                NODE_NAME,
                "--node-ip",
                NODE_IP,
                "-v",
                "1",
            ],
        )

    def _kube_proxy(self, bins: Path, kubeconfig: str) -> None:
        config = kube_proxy_config(kubeconfig)
        (self.work / "kube-proxy.yaml").write_text(yaml.safe_dump(config))
        self._spawn(
            "kube-proxy",
            [str(bins / "kube-proxy"), "--config", str(self.work / "kube-proxy.yaml"), "-v", "1"],
        )

    def _check_alive(self) -> None:
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {self.logs}")

    def _wait_ready(self, deadline: float) -> None:
        kubectl = ["kubectl", "--kubeconfig", str(self.cluster.kubeconfig)]
        last = ""
        while time.monotonic() < deadline:
            self._check_alive()
            got = subprocess.run(
                [*kubectl, "get", "node", NODE_NAME, "-o", "json"],
                capture_output=True,
                text=True,
                check=False,
            )
            if got.returncode == 0:
                node = json.loads(got.stdout)
                conds = {c["type"]: c for c in node["status"].get("conditions") or []}
                taints = node["spec"].get("taints") or []
                ready = conds.get("Ready", {}).get("status") == "True"
                tables = subprocess.run(
                    ["nft", "list", "table", "ip", "kube-proxy"], capture_output=True, check=False
                )
                if ready and not taints and tables.returncode == 0:
                    return
                last = f"Ready={conds.get('Ready', {}).get('message')!r} taints={taints}"
            else:
                last = got.stderr.strip()
            time.sleep(0.5)
        raise TimeoutError(f"node {NODE_NAME} not ready: {last}; see {self.logs}")

    # -- stop ------------------------------------------------------------------------------
    def _stop_process(self, name: str) -> None:
        proc = self._procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        terminate_group(proc)
        wait_or_kill_group(proc, timeout=15)

    def _remove_pods(self) -> None:
        """Every pod sandbox through the CRI's own teardown (CNI DEL frees its address and
        veth), while containerd still runs."""
        ctr = ["ctr", "--address", str(self.containerd_socket), "-n", "k8s.io"]
        tasks = subprocess.run(
            [*ctr, "tasks", "ls", "-q"], capture_output=True, text=True, check=False
        ).stdout.split()
        for task in tasks:
            quiet(*ctr, "tasks", "kill", "-s", "SIGKILL", task)
        deadline = time.monotonic() + 10
        for task in tasks:
            while time.monotonic() < deadline:
                done = subprocess.run([*ctr, "tasks", "rm", task], capture_output=True, check=False)
                if done.returncode == 0:
                    break
                time.sleep(0.2)
        for container in subprocess.run(
            [*ctr, "containers", "ls", "-q"], capture_output=True, text=True, check=False
        ).stdout.split():
            quiet(*ctr, "containers", "rm", container)

    def _remove_rules(self) -> None:
        """The rules made since start (devtools/node_host.py), once."""
        if not self._rules_recorded:
            return
        self._rules_recorded = False
        host.remove_rules(self._tables_before, self._chains_before)

    def _drain(self) -> None:
        """Delete this node's pods while the kubelet runs, so it tears each sandbox down through
        the CRI (CNI DEL frees its address and veth); wait a little for that. Only this node's:
        a benchmark's thousands of pods on simulated nodes (devtools/kwok.py) took minutes."""
        if "kubelet" not in self._procs or self._procs["kubelet"].poll() is not None:
            return
        kubectl = ["kubectl", "--kubeconfig", str(self.cluster.kubeconfig)]
        here = f"--field-selector=spec.nodeName={NODE_NAME}"
        quiet(*kubectl, "delete", "pods", "--all", "-A", here, "--grace-period=0", "--force")
        ctr = ["ctr", "--address", str(self.containerd_socket), "-n", "k8s.io"]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            left = subprocess.run(
                [*ctr, "tasks", "ls", "-q"], capture_output=True, text=True, check=False
            ).stdout.split()
            if not left:
                return
            time.sleep(0.5)

    def stop(self) -> None:
        # No new pod is placed while the node's pods are deleted.
        self._stop_process("kube-scheduler")
        self._drain()
        if self._dns is not None:
            self._dns.shutdown()
            self._dns.server_close()
            self._dns = None
        for name in ("kube-proxy", "kubelet"):
            self._stop_process(name)
        if "containerd" in self._procs and self._procs["containerd"].poll() is None:
            self._remove_pods()
        self._stop_process("containerd")
        self._procs.clear()
        self._remove_rules()
        if self._database is not None:
            self._database.stop()
            self._database = None
        if self._api_forwarder is not None:
            self._api_forwarder.stop()
            self._api_forwarder = None
        host.unmount_under(self.work)
        host.remove_sandbox_netns(self._netns_before)
        for undo in reversed(self._undo):
            quiet(*undo)
        self._undo.clear()
        host.remove_kubepods_cgroups(self._cgroups_before)
        if not self._run_containerd_before and RUN_CONTAINERD.exists():
            host.remove_run_containerd()
            self._run_containerd_before = True
        host.restore_sysctls(self._sysctls)
        self._sysctls.clear()
        if self._lock is not None:
            self._lock.close()
            self._lock = None


@contextlib.contextmanager
def cluster_with_node(**options: Any) -> Iterator[LocalCluster]:
    """A ``LocalCluster`` (``options`` as its own) with the controllers that make pods, and
    its node running with NetworkPolicies enforced (``devtools/netpol.py``, docs/platform.md
    §9): stopped before the control plane. Pods reach the API server where the real maas-api
    runs (it needs it: docs/maas-api.md)."""
    if images.runs_real_maas_api():
        options.setdefault("pods_reach_at", NODE_IP)
    options["extra_users"] = [*options.get("extra_users", []), FIREWALL_USER]
    with LocalCluster(controllers=NODE_CONTROLLERS, **options) as local:
        node = Node(local)
        node.start()
        firewall = Firewall(local, NODE_NAME)
        try:
            firewall.start()
            yield local
        finally:
            firewall.stop()
            node.stop()
