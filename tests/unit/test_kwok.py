"""devtools/kwok.py's pure parts: the fake Nodes, KWOK's command line, the plot's staircase."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from benchmarks import side_by_side_plot
from devtools import kwok
from devtools.cluster import SERVICE_CIDR
from devtools.node import POD_CIDR as REAL_NODE_POD_CIDR


def test_fake_nodes_carry_what_kwok_selects_on() -> None:
    names = kwok.node_names(3)
    assert names == ["kwok-node-0", "kwok-node-1", "kwok-node-2"]
    items = kwok.nodes_list(3)["items"]
    assert [n["metadata"]["name"] for n in items] == names
    selector = next(a for a in kwok.kwok_args(Path("kwok"), Path("kc")) if "selector" in a)
    key, value = selector.split("=", 1)[1].split("=")
    for node in items:
        assert node["metadata"]["annotations"][key] == value
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == node["metadata"]["name"]


def test_fake_nodes_have_no_taint_and_room_for_a_thousand_tenants() -> None:
    items = kwok.nodes_list(kwok.DEFAULT_NODES)["items"]
    assert all("taints" not in n["spec"] for n in items)
    pods = sum(int(n["status"]["allocatable"]["pods"]) for n in items)
    # 50m CPU per maas-api pod (docs/platform.md §1); the reference runs three per tenant
    cpu_millis = sum(int(n["status"]["allocatable"]["cpu"]) * 1000 for n in items)
    assert pods >= 1100 * kwok.PODS_PER_TENANT
    assert cpu_millis // 50 >= 1100 * kwok.PODS_PER_TENANT


def test_manifests_are_copies() -> None:
    node = kwok.node_manifest("a")
    node["status"]["capacity"]["pods"] = "1"
    assert kwok.node_manifest("a")["status"]["capacity"]["pods"] == kwok.NODE_CAPACITY["pods"]


def test_simulated_addresses_stay_apart_from_the_real_ones() -> None:
    fake = ipaddress.ip_network(kwok.POD_CIDR)
    assert ipaddress.ip_address(kwok.NODE_IP) in fake
    for other in (REAL_NODE_POD_CIDR, SERVICE_CIDR):
        assert not fake.overlaps(ipaddress.ip_network(other))


def test_kwok_command_line() -> None:
    args = kwok.kwok_args(Path("/bin/kwok"), Path("/tmp/kubeconfig"))
    assert args[0] == "/bin/kwok"
    assert "--kubeconfig=/tmp/kubeconfig" in args
    assert f"--cidr={kwok.POD_CIDR}" in args
    assert "--manage-all-nodes=false" in args
    # no server of its own: nothing listens beyond loopback
    assert not any(a.startswith("--server-address") for a in args)


def test_describe_says_when_nodes_are_simulated() -> None:
    assert "SIMULATED" in kwok.describe(6)
    assert "SIMULATED" not in kwok.describe(0)


def test_ready_staircase() -> None:
    xs, ys = side_by_side_plot.ready_steps([3.0, 1.0, 2.0])
    assert xs == [0.0, 1.0, 2.0, 3.0]
    assert ys == [0, 1, 2, 3]
