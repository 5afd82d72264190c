"""Simulated nodes for the scale benchmarks: KWOK's controller plays the kubelet for fake Nodes.

A 2-core machine's one real node (``devtools/node.py``) holds some 38 maas-api pods by their
CPU requests; the scale figures need a thousand. ``simulated_nodes`` adds ``count`` fake Nodes
to a ``cluster_with_node`` cluster and runs KWOK (``sigs.k8s.io/kwok``, built by
``scripts/build-kwok.sh`` from ``tools/kwok``) as a host process against it. The real
kube-scheduler places every pod, the real deployment controller makes each Deployment
Available from the pod status KWOK writes (its default stages: Running, every condition True,
every container ready, at once); no container runs. See docs/design.md, "Scale with
simulated nodes".

Network safety: KWOK gives the fake nodes' pods addresses from ``POD_CIDR`` and the Nodes an
address in it too; that range is routed to a blackhole for as long as the nodes exist, so a
packet for a simulated pod (a Service's endpoint, say) never leaves the machine.

While the fake nodes exist the real node is cordoned, so every new pod lands on a fake one;
``stop`` (the context manager's exit) uncordons it, deletes the fake Nodes, stops KWOK by pid
and removes the route. The e2e suite never uses this module.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.cluster import REPO_ROOT, LocalCluster, built_by, kube_bin_dir, terminate_group
from devtools.cluster import wait_or_kill_group as wait_group
from devtools.node import NODE_NAME

BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-kwok.sh"
# Not the real node's range (10.244.0.0/22) nor the Service range (10.96.0.0/16).
POD_CIDR = "10.246.0.0/16"
NODE_IP = "10.246.255.254"
# What marks a Node as KWOK's: the annotation it selects on (--manage-nodes-with-...) and a
# label, so a reader of `kubectl get nodes -L type` sees which nodes are simulated.
FAKE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_VALUE = "fake"
NODE_PREFIX = "kwok-node-"
# Room for 250 pods (maas-api's: 50m CPU, 64Mi each; docs/design.md) per node. A tenant of
# ours runs one pod, one of the reference three (maas-api and two payload-processing
# Deployments in the Gateway namespace): the default takes 1,100 tenants of either (a thousand,
# with the lifecycle and burst tenants beside them). Six nodes stalled the reference at 500.
PODS_PER_NODE = 250
NODE_CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": str(PODS_PER_NODE)}
PODS_PER_TENANT = 3  # the most of the controllers compared
DEFAULT_NODES = -(-1_100 * PODS_PER_TENANT // PODS_PER_NODE)  # rounded up: 14


def add_simulated_nodes_argument(parser: argparse.ArgumentParser) -> None:
    """``--simulated-nodes [N]``, the benchmarks' switch to pods on KWOK's nodes."""
    parser.add_argument(
        "--simulated-nodes",
        type=int,
        nargs="?",
        const=DEFAULT_NODES,
        default=0,
        help=f"run the pods on this many KWOK nodes (alone: {DEFAULT_NODES}) with the real "
        "node cordoned; devtools/kwok.py",
    )


# Node leases instead of a status write per node per heartbeat: KWOK's default node stages
# pick the lease heartbeat when this is not 0.
LEASE_SECONDS = 40


def kwok_bin() -> Path:
    return built_by(BUILD_SCRIPT) / "kwok"


def node_names(count: int) -> list[str]:
    return [f"{NODE_PREFIX}{i}" for i in range(count)]


def node_manifest(name: str) -> dict[str, Any]:
    """A fake Node KWOK manages: no taint (the real node is cordoned instead, so pods need no
    toleration), capacity for ~250 maas-api pods; KWOK's node-initialize stage writes the
    rest of its status (conditions, addresses, nodeInfo) and keeps this capacity."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE_ANNOTATION: FAKE_VALUE},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "spec": {},
        "status": {
            "capacity": dict(NODE_CAPACITY),
            "allocatable": dict(NODE_CAPACITY),
        },
    }


def nodes_list(count: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [node_manifest(n) for n in node_names(count)],
    }


def kwok_args(binary: Path, kubeconfig: Path) -> list[str]:
    """KWOK's command line: only the annotated Nodes, addresses from ``POD_CIDR``, no server
    of its own (no --server-address: nothing listens), its default stages."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--manage-nodes-with-annotation-selector={FAKE_ANNOTATION}={FAKE_VALUE}",
        "--manage-all-nodes=false",
        f"--cidr={POD_CIDR}",
        f"--node-ip={NODE_IP}",
        f"--node-lease-duration-seconds={LEASE_SECONDS}",
    ]


@dataclass
class SimulatedNodes:
    """KWOK and ``count`` fake Nodes on ``cluster`` (module docstring)."""

    cluster: LocalCluster
    count: int = DEFAULT_NODES
    proc: subprocess.Popen[bytes] | None = None
    _undo: list[list[str]] = field(default_factory=list)

    @property
    def log(self) -> Path:
        assert self.cluster.workdir is not None
        return self.cluster.workdir / "logs" / "kwok.log"

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [str(kube_bin_dir() / "kubectl"), f"--kubeconfig={self.cluster.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def start(self) -> None:
        binary = kwok_bin()
        # Routed before any fake pod has an address (module docstring).
        subprocess.run(["ip", "route", "replace", "blackhole", POD_CIDR], check=True)
        self._undo.append(["ip", "route", "del", "blackhole", POD_CIDR])
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                kwok_args(binary, self.cluster.kubeconfig),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.kubectl("apply", "-f", "-", stdin=json.dumps(nodes_list(self.count)))
        self.kubectl("cordon", NODE_NAME)
        self.kubectl(
            "wait", "--for=condition=Ready", "--timeout=120s",
            *(f"node/{n}" for n in node_names(self.count)),
        )  # fmt: skip

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.kubectl("uncordon", NODE_NAME)
        with contextlib.suppress(subprocess.CalledProcessError):
            self.kubectl("delete", "node", "--wait=false", *node_names(self.count))
        if self.proc is not None and self.proc.poll() is None:
            terminate_group(self.proc)
            wait_group(self.proc, 10)
        for command in reversed(self._undo):
            subprocess.run(command, check=False, capture_output=True)
        self._undo.clear()


@contextlib.contextmanager
def simulated_nodes(cluster: LocalCluster, count: int) -> Iterator[SimulatedNodes | None]:
    """``count`` fake Nodes with KWOK for the block (none, and nothing started, for 0)."""
    if count <= 0:
        yield None
        return
    nodes = SimulatedNodes(cluster, count)
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()


def describe(count: int) -> str:
    """What a benchmark prints so a reader knows where its pods ran."""
    if count <= 0:
        return "pods on the real node (devtools/node.py)"
    return (
        f"pods on {count} SIMULATED nodes (KWOK: scheduled by the real scheduler, made"
        " Available by the real deployment controller, no container runs)"
    )
