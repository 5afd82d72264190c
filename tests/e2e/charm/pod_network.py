"""A pod's network on this machine: a network namespace of its own, reached over a veth pair.

Juju runs each unit in a pod: its charm and its workload share the pod's network namespace,
its webhook listens on the pod's own address (so every unit can use port 9443), and the API
server reaches it through the app's Service endpoints. ``pod()`` makes one such namespace
(``ip netns``, so it needs root, as real Pebble does): a veth pair with this machine's end at
``host_ip`` and the pod's at ``ip``, the pod's loopback up. ``devtools.forwarder.Forwarder``
carries TCP from an address the pod can reach to the API server, which listens on this
machine's loopback only.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Pod:
    """One unit's network namespace: this machine at ``host_ip``, the pod at ``ip``."""

    name: str
    host_ip: str
    ip: str

    @property
    def netns(self) -> Path:
        return Path("/run/netns") / self.name


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@contextlib.contextmanager
def pod(index: int) -> Iterator[Pod]:
    """Pod ``index`` of this test process: a /30 of 10.231.0.0/16 of its own (the third octet
    from the process id, so two runs at once rarely meet), deleted on exit."""
    tag, octet = os.getpid() % 100_000, 1 + os.getpid() % 250
    made = Pod(
        name=f"aitenant-pod-{tag}-{index}",
        host_ip=f"10.231.{octet}.{4 * index + 1}",
        ip=f"10.231.{octet}.{4 * index + 2}",
    )
    host_end, pod_end = f"ath{tag}p{index}", f"atp{tag}p{index}"  # at most 15 characters
    _ip("netns", "add", made.name)
    try:
        _ip("link", "add", host_end, "type", "veth", "peer", "name", pod_end)
        _ip("link", "set", pod_end, "netns", made.name)
        _ip("addr", "add", f"{made.host_ip}/30", "dev", host_end)
        _ip("link", "set", host_end, "up")
        _ip("-n", made.name, "addr", "add", f"{made.ip}/30", "dev", pod_end)
        _ip("-n", made.name, "link", "set", pod_end, "up")
        _ip("-n", made.name, "link", "set", "lo", "up")
        yield made
    finally:
        # Deleting the namespace deletes the pod's end, and with it the pair.
        subprocess.run(["ip", "netns", "del", made.name], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", host_end], capture_output=True, check=False)


def kubeconfig_via(source: Path, server: str, target: Path) -> Path:
    """``source`` with its cluster's server replaced by ``server`` (the pod's way to the API
    server); the test kubeconfigs skip TLS verification, so the name need not match."""
    config: dict[str, Any] = yaml.safe_load(source.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = server
    target.write_text(yaml.safe_dump(config))
    target.chmod(0o600)
    return target
