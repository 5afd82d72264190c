"""The node's changes to this machine (devtools/node.py) and their undoing: the bridge, the
Service route, forwarding on the bridge only and the nftables table that drops everything
else forwarded; and, at stop, the rules, mounts, network namespaces, cgroups and kernel
settings the kubelet, kube-proxy and containerd leave behind."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from devtools.cluster import SERVICE_CIDR
from devtools.node_config import BRIDGE, NODE_IP, POD_PREFIX, cni_conflist

NFT_TABLE = "aitenant-node-guard"
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


def run(*args: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")


def quiet(*args: str) -> None:
    subprocess.run(args, capture_output=True, check=False)


def read_sysctls() -> dict[str, str]:
    """The kernel settings the kubelet changes at start, as they are now."""
    return {key: (Path("/proc/sys") / key).read_text().strip() for key in KUBELET_SYSCTLS}


def restore_sysctls(values: dict[str, str]) -> None:
    for key, value in values.items():
        with contextlib.suppress(OSError):
            (Path("/proc/sys") / key).write_text(value)


def add_network(work: Path, undo: list[tuple[str, ...]]) -> None:
    """The bridge, the Service route, the forward guard and the CNI network list; each
    step's undo command goes on ``undo`` as soon as it is made."""
    # Leftovers of an earlier run of ours that died without stopping (we hold the lock).
    quiet("ip", "link", "del", BRIDGE)
    quiet("nft", "delete", "table", "inet", NFT_TABLE)
    run("ip", "link", "add", BRIDGE, "type", "bridge")
    undo.append(("ip", "link", "del", BRIDGE))
    run("ip", "addr", "add", f"{NODE_IP}/{POD_PREFIX}", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")
    # The Service range: a ClusterIP without a kube-proxy rule stays here (and times out).
    run("ip", "route", "add", SERVICE_CIDR, "dev", BRIDGE)
    undo.append(("ip", "route", "del", SERVICE_CIDR, "dev", BRIDGE))
    # Nothing is forwarded but from the bridge back onto it (the bridge CNI plugin turns
    # on forwarding for the whole machine, which forwarded nothing before: see Node.stop()).
    guard = (
        f"table inet {NFT_TABLE} {{\n"
        "  chain forward {\n"
        "    type filter hook forward priority -10; policy drop;\n"
        f'    iifname "{BRIDGE}" oifname "{BRIDGE}" accept\n'
        "  }\n"
        "}\n"
    )
    subprocess.run(["nft", "-f", "-"], input=guard.encode(), check=True, capture_output=True)
    undo.append(("nft", "delete", "table", "inet", NFT_TABLE))
    # A pod reaching a ClusterIP is forwarded back onto the bridge after kube-proxy's
    # DNAT: forwarding on this bridge only (the device's setting goes with the device).
    Path(f"/proc/sys/net/ipv4/conf/{BRIDGE}/forwarding").write_text("1")
    cni = work / "cni" / "net.d"
    cni.mkdir(parents=True, exist_ok=True)
    (cni / "10-aitenant.conflist").write_text(json.dumps(cni_conflist(work)))


def remove_rules(tables_before: set[str], chains_before: set[tuple[str, str, str]]) -> None:
    """nftables tables made since start (kube-proxy's, and those iptables made for the
    kubelet), and the kubelet's chains in tables that were there before."""
    for table in nft_tables() - tables_before:
        if table != f"inet {NFT_TABLE}":  # ours goes with the rest of the node's undo list
            quiet("nft", "delete", "table", *table.split())
    for command, table, chain in iptables_chains() - chains_before:
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
        quiet(command, "-w", "-t", table, "-F", chain)
        quiet(command, "-w", "-t", table, "-X", chain)


def kubepods_cgroups() -> set[Path]:
    """The kubelet's top cgroups (kubepods) present now."""
    found = set(Path("/sys/fs/cgroup").glob("*/kubepods"))
    return found | set(Path("/sys/fs/cgroup").glob("kubepods"))


def netns_names() -> set[str]:
    return set(os.listdir("/run/netns")) if Path("/run/netns").exists() else set()


def unmount_under(work: Path) -> None:
    """Mounts left under ``work`` (shm, rootfs, secret volumes), deepest first."""
    with contextlib.suppress(OSError):
        mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        for point in sorted((m for m in mounts if m.startswith(str(work))), key=len, reverse=True):
            quiet("umount", "-l", point)


def remove_sandbox_netns(before: set[str]) -> None:
    """Network namespaces containerd made for our sandboxes."""
    if Path("/run/netns").exists():
        for ns in set(os.listdir("/run/netns")) - before:
            if ns.startswith("cni-"):
                quiet("umount", "-l", f"/run/netns/{ns}")
                with contextlib.suppress(OSError):
                    os.unlink(f"/run/netns/{ns}")


def remove_kubepods_cgroups(before: set[Path]) -> None:
    """The kubelet's cgroups (kubepods and below), when they were not there before us."""
    for top in list(Path("/sys/fs/cgroup").glob("*/kubepods")) + list(
        Path("/sys/fs/cgroup").glob("kubepods")
    ):
        if top in before:
            continue
        for sub in sorted(top.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if sub.is_dir():
                with contextlib.suppress(OSError):
                    sub.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def remove_run_containerd() -> None:
    """containerd 1.6's shim sockets directory (/run/containerd), empty parts only."""
    if not RUN_CONTAINERD.exists():
        return
    deepest_first = sorted(RUN_CONTAINERD.rglob("*"), key=lambda p: -len(p.parts))
    for sub in (d for d in deepest_first if d.is_dir()):
        with contextlib.suppress(OSError):
            sub.rmdir()  # only what is empty: a shim still running keeps its socket
    with contextlib.suppress(OSError):
        RUN_CONTAINERD.rmdir()
