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
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import socketserver
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from devtools import images
from devtools.cluster import (
    REPO_ROOT,
    SERVICE_CIDR,
    LocalCluster,
    free_port,
    terminate_group,
    wait_or_kill_group,
)
from devtools.forwarder import Forwarder
from devtools.netpol import USER as FIREWALL_USER
from devtools.netpol import Firewall
from devtools.postgres import Postgres

BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-node.sh"
NODE_NAME = "aitenant-node"
BRIDGE = "aitnode0"
NODE_IP = "10.244.0.1"
POD_CIDR = "10.244.0.0/22"
POD_PREFIX = POD_CIDR.split("/")[1]
# Every tenant of an e2e run or a benchmark keeps its maas-api pod: room for the 250-tenant
# benchmark and the suite's tenants together (the kubelet's default is 110).
MAX_PODS = 400
NFT_TABLE = "aitenant-node-guard"
# A port nothing listens on (TCP port 1, tcpmux, runs nowhere here): image pulls end there.
CLOSED_PORT = 1
CLUSTER_DOMAIN = "cluster.local"
# Controllers a node needs beside the namespace and garbage-collector ones: Deployments,
# CronJobs and Jobs make pods; nodelifecycle lifts the not-ready taint the kubelet registers
# with; endpointslice feeds kube-proxy.
NODE_CONTROLLERS = (
    "namespace,garbagecollector,deployment,replicaset,job,cronjob,endpointslice,"
    "endpointslicemirroring,nodelifecycle,podgc,serviceaccount"
)
# What the kubelet sets at start unless protectKernelDefaults (which would refuse to start
# on this machine's values instead): read before, put back after.
KUBELET_SYSCTLS = (
    "net/ipv4/ip_forward",  # not the kubelet's: the bridge CNI plugin's
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
LOCK_FILE = Path("/run/aitenant-node.lock")
RUN_CONTAINERD = Path("/run/containerd")
# Chains the kubelet adds through iptables (nf_tables backend) at start, per table.
KUBELET_CHAINS = {
    "mangle": ("KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"),
    "nat": ("KUBE-KUBELET-CANARY",),
    "filter": ("KUBE-KUBELET-CANARY", "KUBE-FIREWALL"),
}


def nft_tables() -> set[str]:
    """``family name`` of every nftables table of this machine."""
    out = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=False)
    return {line.removeprefix("table ").strip() for line in out.stdout.splitlines() if line}


def iptables_chains() -> set[tuple[str, str, str]]:
    """The kubelet's chains present now, as (command, table, chain)."""
    present = set()
    # Without iptables installed the kubelet makes no chains (it only logs that it cannot).
    for command in (c for c in ("iptables", "ip6tables") if shutil.which(c)):
        for table, chains in KUBELET_CHAINS.items():
            for chain in chains:
                done = subprocess.run(
                    [command, "-w", "-t", table, "-S", chain], capture_output=True, check=False
                )
                if done.returncode == 0:
                    present.add((command, table, chain))
    return present


def node_bin_dir() -> Path:
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return Path(out.strip().splitlines()[-1])


def _run(*args: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")


def _quiet(*args: str) -> None:
    subprocess.run(args, capture_output=True, check=False)


class ServiceDNS(socketserver.ThreadingUDPServer):
    """Answers A queries for ``<service>.<namespace>.svc.cluster.local`` with the Service's
    ClusterIP (read from the API server with kubectl's JSON); every other name is NXDOMAIN.
    It never forwards a query anywhere."""

    daemon_threads = True

    def __init__(self, address: str, kubectl: list[str]) -> None:
        self.kubectl = kubectl
        super().__init__((address, 53), _DNSHandler)

    def cluster_ip(self, name: str) -> str | None:
        suffix = f".svc.{CLUSTER_DOMAIN}"
        if not name.endswith(suffix):
            return None
        parts = name.removesuffix(suffix).split(".")
        if len(parts) != 2:
            return None
        service, namespace = parts
        got = subprocess.run(
            [*self.kubectl, "get", "service", "-n", namespace, service, "-o", "json"],
            capture_output=True,
            text=True,
            check=False,
        )
        if got.returncode != 0:
            return None
        ip = json.loads(got.stdout)["spec"].get("clusterIP")
        return ip if ip and ip != "None" else None


class _DNSHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data, sock = self.request
        server = self.server
        assert isinstance(server, ServiceDNS)
        with contextlib.suppress(Exception):
            sock.sendto(_answer(data, server.cluster_ip), self.client_address)


def _answer(query: bytes, lookup: Callable[[str], str | None]) -> bytes:
    ident, flags = struct.unpack("!HH", query[:4])
    labels, pos = [], 12
    while query[pos]:
        length = query[pos]
        labels.append(query[pos + 1 : pos + 1 + length].decode().lower())
        pos += 1 + length
    qtype = struct.unpack("!H", query[pos + 1 : pos + 3])[0]
    question = query[12 : pos + 5]
    ip = lookup(".".join(labels))
    rd = flags & 0x0100
    if ip is None:
        return struct.pack("!HHHHHH", ident, 0x8400 | rd | 3, 1, 0, 0, 0) + question
    if qtype != 1:  # the name exists, with no record of that type
        return struct.pack("!HHHHHH", ident, 0x8400 | rd, 1, 0, 0, 0) + question
    record = struct.pack("!HHHIH", 0xC00C, 1, 1, 5, 4) + socket.inet_aton(ip)
    return struct.pack("!HHHHHH", ident, 0x8400 | rd, 1, 1, 0, 0) + question + record


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
        self._netns_before = set(os.listdir("/run/netns")) if Path("/run/netns").exists() else set()
        self._cgroups_before = set(Path("/sys/fs/cgroup").glob("*/kubepods"))
        self._cgroups_before |= set(Path("/sys/fs/cgroup").glob("kubepods"))
        self._tables_before = nft_tables()
        # containerd 1.6 puts its shims' sockets under /run/containerd/s whatever its state
        # directory: removed at stop when it was not there before.
        self._run_containerd_before = RUN_CONTAINERD.exists()
        self._chains_before = iptables_chains()
        self._rules_recorded = True
        for key in KUBELET_SYSCTLS:
            self._sysctls[key] = (Path("/proc/sys") / key).read_text().strip()
        self._network()
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

    # -- network ---------------------------------------------------------------------------
    def _network(self) -> None:
        # Leftovers of an earlier run of ours that died without stopping (we hold the lock).
        _quiet("ip", "link", "del", BRIDGE)
        _quiet("nft", "delete", "table", "inet", NFT_TABLE)
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        self._undo.append(("ip", "link", "del", BRIDGE))
        _run("ip", "addr", "add", f"{NODE_IP}/{POD_PREFIX}", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        # The Service range: a ClusterIP without a kube-proxy rule stays here (and times out).
        _run("ip", "route", "add", SERVICE_CIDR, "dev", BRIDGE)
        self._undo.append(("ip", "route", "del", SERVICE_CIDR, "dev", BRIDGE))
        # Nothing is forwarded but from the bridge back onto it (the bridge CNI plugin turns
        # on forwarding for the whole machine, which forwarded nothing before: see stop()).
        guard = (
            f"table inet {NFT_TABLE} {{\n"
            "  chain forward {\n"
            "    type filter hook forward priority -10; policy drop;\n"
            f'    iifname "{BRIDGE}" oifname "{BRIDGE}" accept\n'
            "  }\n"
            "}\n"
        )
        subprocess.run(["nft", "-f", "-"], input=guard.encode(), check=True, capture_output=True)
        self._undo.append(("nft", "delete", "table", "inet", NFT_TABLE))
        # A pod reaching a ClusterIP is forwarded back onto the bridge after kube-proxy's
        # DNAT: forwarding on this bridge only (the device's setting goes with the device).
        Path(f"/proc/sys/net/ipv4/conf/{BRIDGE}/forwarding").write_text("1")
        cni = self.work / "cni" / "net.d"
        cni.mkdir(parents=True, exist_ok=True)
        conf = {
            "cniVersion": "1.0.0",
            "name": "aitenant-node",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP}]],
                        # Pods get a route to the Service range only: no default route, so
                        # a pod has no way to any address but ours.
                        "routes": [{"dst": SERVICE_CIDR}],
                        "dataDir": str(self.work / "cni" / "ipam"),
                    },
                }
            ],
        }
        (cni / "10-aitenant.conflist").write_text(json.dumps(conf))

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
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config = f"""version = 2
root = "{base}/root"
state = "{base}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{self.containerd_socket}"
[ttrpc]
  address = "{base}/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{base}/opt"
[{cri}]
  sandbox_image = "{images.PAUSE_IMAGE}"
  # Lowering oom_score_adj is refused on these machines: runc then fails every sandbox.
  restrict_oom_score_adj = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{base}/runc"
  [{cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{self.work}/cni/net.d"
"""
        base.mkdir(parents=True, exist_ok=True)
        (base / "config.toml").write_text(config)
        # Every registry request goes through a proxy on a closed loopback port, without a
        # name lookup: an image that was not imported (a default image name, a tag the
        # kubelet always pulls) fails to pull here instead of reaching for a registry off
        # this machine. (containerd 1.6 has no catch-all registry host configuration.)
        nowhere = f"http://127.0.0.1:{CLOSED_PORT}"
        proxy = {
            name: nowhere for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")
        }
        self._spawn(
            "containerd",
            ["containerd", "--config", str(base / "config.toml")],
            env={**proxy, "NO_PROXY": "", "no_proxy": ""},
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
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # This machine has cgroup v1 (with v2 mounted beside it).
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "address": NODE_IP,
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzPort": 0,
            # Only on our bridge's address: the API server's log and exec requests carry
            # no client certificate here.
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "clusterDNS": [NODE_IP],
            "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": str(resolv),
            "podLogsDir": str(self.work / "pod-logs"),
            "podCIDR": POD_CIDR,
            "failSwapOn": False,
            "volumePluginDir": str(self.work / "volume-plugins"),
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "1Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
            "maxPods": MAX_PODS,
            "syncFrequency": "10s",
            "fileCheckFrequency": "10s",
        }
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
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "nftables",
            "clientConnection": {"kubeconfig": kubeconfig},
            "hostnameOverride": NODE_NAME,
            "bindAddress": NODE_IP,
            "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "clusterCIDR": POD_CIDR,
            # A pod reaching a Service on its own bridge gets the answer back through us.
            "masqueradeAll": True,
            # Leave the machine's conntrack settings alone.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "nodePortAddresses": [f"{NODE_IP}/32"],
        }
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
            _quiet(*ctr, "tasks", "kill", "-s", "SIGKILL", task)
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
            _quiet(*ctr, "containers", "rm", container)

    def _remove_rules(self) -> None:
        """nftables tables made since start (kube-proxy's, and those iptables made for the
        kubelet), and the kubelet's chains in tables that were there before."""
        if not self._rules_recorded:
            return
        self._rules_recorded = False
        for table in nft_tables() - self._tables_before:
            if table != f"inet {NFT_TABLE}":  # ours goes with the rest of our undo list
                _quiet("nft", "delete", "table", *table.split())
        for command, table, chain in iptables_chains() - self._chains_before:
            if chain == "KUBE-FIREWALL":
                for hook in ("INPUT", "OUTPUT"):
                    while (
                        subprocess.run(
                            [command, "-w", "-t", table, "-D", hook, "-j", chain],
                            capture_output=True,
                            check=False,
                        ).returncode
                        == 0
                    ):
                        pass
            _quiet(command, "-w", "-t", table, "-F", chain)
            _quiet(command, "-w", "-t", table, "-X", chain)

    def _drain(self) -> None:
        """Delete every pod while the kubelet runs, so it tears each sandbox down through the
        CRI (CNI DEL frees its address and veth); wait a little for that."""
        if "kubelet" not in self._procs or self._procs["kubelet"].poll() is not None:
            return
        kubectl = ["kubectl", "--kubeconfig", str(self.cluster.kubeconfig)]
        _quiet(*kubectl, "delete", "pods", "--all", "-A", "--grace-period=0", "--force")
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
        # Mounts left under our directory (shm, rootfs, secret volumes), deepest first.
        with contextlib.suppress(OSError):
            mounts = [
                line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
            ]
            for point in sorted(
                (m for m in mounts if m.startswith(str(self.work))), key=len, reverse=True
            ):
                _quiet("umount", "-l", point)
        # Network namespaces containerd made for our sandboxes.
        if Path("/run/netns").exists():
            for ns in set(os.listdir("/run/netns")) - self._netns_before:
                if ns.startswith("cni-"):
                    _quiet("umount", "-l", f"/run/netns/{ns}")
                    with contextlib.suppress(OSError):
                        os.unlink(f"/run/netns/{ns}")
        for undo in reversed(self._undo):
            _quiet(*undo)
        self._undo.clear()
        # The kubelet's cgroups (kubepods and below), when they were not there before us.
        for top in list(Path("/sys/fs/cgroup").glob("*/kubepods")) + list(
            Path("/sys/fs/cgroup").glob("kubepods")
        ):
            if top in self._cgroups_before:
                continue
            for sub in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                if sub.is_dir():
                    with contextlib.suppress(OSError):
                        sub.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()
        if not self._run_containerd_before and RUN_CONTAINERD.exists():
            deepest_first = sorted(RUN_CONTAINERD.rglob("*"), key=lambda p: -len(p.parts))
            for sub in (d for d in deepest_first if d.is_dir()):
                with contextlib.suppress(OSError):
                    sub.rmdir()  # only what is empty: a shim still running keeps its socket
            with contextlib.suppress(OSError):
                RUN_CONTAINERD.rmdir()
            self._run_containerd_before = True
        for key, value in self._sysctls.items():
            with contextlib.suppress(OSError):
                (Path("/proc/sys") / key).write_text(value)
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
