"""NetworkPolicy enforcement on a node (``devtools/node.py``): kube-router's firewall only.

kube-router (``scripts/build-kube-router.sh`` builds it from ``tools/kube-router``) runs with
its network-policy controller alone: no routing, no service proxy (kube-proxy stays the node's
proxy). It writes iptables rules (this machine's iptables, nf_tables backend) and ipsets that
admit or reject each packet to or from a pod by the NetworkPolicies that select it. Packets
between two pods on the node's bridge reach those rules only through bridge netfilter
(``net.bridge.bridge-nf-call-iptables``), which ``start()`` turns on if it is off and ``stop()``
puts back. docs/platform.md §9 says what the tests check with it.

kube-router authenticates as a static-token user of its own (``USER``, which
``cluster_with_node`` adds to the cluster's users), bound by ``start()`` to a ClusterRole that
only reads what its informers watch.

``stop()`` stops exactly the process it started, then removes the rules, chains and ipsets
kube-router made, by their names' prefixes (kube-router's own ``--cleanup-config`` would also
clean up after its router and service proxy, which never ran here).
"""

from __future__ import annotations

import contextlib
import functools
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devtools.cluster import (
    REPO_ROOT,
    SERVICE_CIDR,
    LocalCluster,
    User,
    built_by,
    cluster_role_with_binding,
    terminate_group,
    wait_or_kill_group,
)

BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-kube-router.sh"
USER = User("aitenant:kube-router", "aitenant-kube-router-token")
RBAC_NAME = "aitenant-kube-router"
# What kube-router's informers list and watch (it starts them all whichever part runs).
READS = (
    ("", ("pods", "namespaces", "nodes", "services", "endpoints")),
    ("discovery.k8s.io", ("endpointslices",)),
    ("networking.k8s.io", ("networkpolicies",)),
)
# The names of what kube-router's firewall makes: filter-table chains and ipsets.
CHAIN_PREFIXES = ("KUBE-ROUTER-", "KUBE-NWPLCY-", "KUBE-POD-FW-")
IPSET_PREFIXES = ("KUBE-SRC-", "KUBE-DST-")
BRIDGE_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
# kube-router logs this (at -v 1) as each full sync of its rules ends.
SYNC_DONE = "sync iptables took"


@functools.cache
def kube_router_binary() -> Path:
    return built_by(BUILD_SCRIPT) / "kube-router"


def rbac(user: User) -> list[dict[str, Any]]:
    """A ClusterRole reading only ``READS``, bound to ``user``."""
    rules: list[dict[str, Any]] = [
        {"apiGroups": [group], "resources": list(resources), "verbs": ["get", "list", "watch"]}
        for group, resources in READS
    ]
    subject = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user.name}
    return cluster_role_with_binding(RBAC_NAME, rules, subject)


def ours(name: str, prefixes: tuple[str, ...]) -> bool:
    return name.startswith(prefixes)


def filter_table() -> list[str]:
    """``iptables-save`` of the filter table, one line a rule or chain."""
    done = subprocess.run(
        ["iptables-save", "-t", "filter"], capture_output=True, text=True, check=False
    )
    return done.stdout.splitlines() if done.returncode == 0 else []


def firewall_chains() -> set[str]:
    """kube-router's chains in the filter table now."""
    return {
        line[1:].split()[0]
        for line in filter_table()
        if line.startswith(":") and ours(line[1:].split()[0], CHAIN_PREFIXES)
    }


def firewall_ipsets() -> set[str]:
    done = subprocess.run(["ipset", "list", "-n"], capture_output=True, text=True, check=False)
    return {name for name in done.stdout.split() if ours(name, IPSET_PREFIXES)}


def jumps_into(line: str, chains: set[str]) -> bool:
    """Whether ``line`` (of ``iptables-save``) is a rule of another chain jumping to one of
    ``chains``."""
    words = line.split()
    if not line.startswith("-A ") or words[1] in chains or "-j" not in words:
        return False
    return words[words.index("-j") + 1] in chains


def remove_firewall() -> None:
    """Every rule jumping to a kube-router chain, then its chains, then its ipsets (the rules
    that use a set go before the set can)."""
    chains = firewall_chains()
    for line in filter_table():
        if jumps_into(line, chains):
            # iptables-save quotes a comment as a shell would: split back the same way.
            delete = ["iptables", "-w", "-t", "filter", "-D", *shlex.split(line[3:])]
            subprocess.run(delete, capture_output=True)
    for chain in chains:
        subprocess.run(["iptables", "-w", "-t", "filter", "-F", chain], capture_output=True)
    for chain in chains:
        subprocess.run(["iptables", "-w", "-t", "filter", "-X", chain], capture_output=True)
    for name in firewall_ipsets():
        subprocess.run(["ipset", "destroy", name], capture_output=True)


@dataclass
class Firewall:
    """kube-router's firewall for ``cluster``'s node: ``start()`` after the node's, ``stop()``
    before it."""

    cluster: LocalCluster
    node_name: str
    _proc: subprocess.Popen[bytes] | None = None
    _bridge_nf_before: str | None = None
    _log: Path = field(default_factory=Path)

    def start(self, timeout: float = 60.0) -> None:
        binary = kube_router_binary()
        assert self.cluster.workdir is not None
        self._log = self.cluster.workdir / "logs" / "kube-router.log"
        # Leftovers of an earlier run that died without stopping (the node's lock is held).
        remove_firewall()
        self._bridge_netfilter_on()
        self._bind_rbac()
        kubeconfig = self.cluster.kubeconfig_for(USER)
        args = [
            str(binary),
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            "--enable-ipv6=false",
            f"--kubeconfig={kubeconfig}",
            f"--hostname-override={self.node_name}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # No health or metrics listener: nothing here reads them.
            "--health-port=0",
            "--metrics-port=0",
            "--v=1",
        ]
        with self._log.open("ab") as log:
            self._proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self._wait_synced(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise

    def _bridge_netfilter_on(self) -> None:
        if not BRIDGE_NF.exists():
            raise RuntimeError(f"no {BRIDGE_NF}: this kernel has no bridge netfilter")
        before = BRIDGE_NF.read_text().strip()
        if before != "1":
            self._bridge_nf_before = before
            BRIDGE_NF.write_text("1")

    def _bind_rbac(self) -> None:
        kubectl = ["kubectl", "--kubeconfig", str(self.cluster.kubeconfig)]
        docs = "---\n".join(yaml.safe_dump(doc) for doc in rbac(USER))
        subprocess.run(
            [*kubectl, "apply", "-f", "-"], input=docs.encode(), check=True, capture_output=True
        )

    def syncs_done(self) -> int:
        """How many full syncs of its rules kube-router has finished so far."""
        with contextlib.suppress(OSError):
            return self._log.read_text(errors="replace").count(SYNC_DONE)
        return 0

    def _wait_synced(self, deadline: float) -> None:
        """Until the first full sync has finished with the top-level chains in place."""
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"kube-router exited with {self._proc.returncode}; see {self._log}"
                )
            if self.syncs_done() and "KUBE-ROUTER-FORWARD" in firewall_chains():
                return
            time.sleep(0.2)
        raise TimeoutError(f"kube-router did not sync its rules; see {self._log}")

    def stop(self) -> None:
        if self._proc is not None:
            terminate_group(self._proc)
            wait_or_kill_group(self._proc, timeout=10)
            self._proc = None
        remove_firewall()
        if self._bridge_nf_before is not None:
            with contextlib.suppress(OSError):
                BRIDGE_NF.write_text(self._bridge_nf_before)
            self._bridge_nf_before = None
