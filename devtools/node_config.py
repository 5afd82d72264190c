"""The node's addresses and the configuration files it renders (devtools/node.py): the CNI
network list, containerd's config.toml, the KubeletConfiguration and the
KubeProxyConfiguration. Pure rendering; writing the files and starting the processes stays
with ``Node``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devtools import images
from devtools.cluster import SERVICE_CIDR, free_port

NODE_NAME = "aitenant-node"
BRIDGE = "aitnode0"
NODE_IP = "10.244.0.1"
POD_CIDR = "10.244.0.0/22"
POD_PREFIX = POD_CIDR.split("/")[1]
# Every tenant of an e2e run or a benchmark keeps its maas-api pod: room for the 250-tenant
# benchmark and the suite's tenants together (the kubelet's default is 110).
MAX_PODS = 400
# A port nothing listens on (TCP port 1, tcpmux, runs nowhere here): image pulls end there.
CLOSED_PORT = 1
CLUSTER_DOMAIN = "cluster.local"


def cni_conflist(work: Path) -> dict[str, Any]:
    """The bridge CNI network: pods on our bridge with host-local addresses."""
    return {
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
                    "dataDir": str(work / "cni" / "ipam"),
                },
            }
        ],
    }


def containerd_config(base: Path, socket: Path, work: Path) -> str:
    """containerd's config.toml: state under ``base``, the CRI with runc and our CNI."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{base}/root"
state = "{base}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{socket}"
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
    conf_dir = "{work}/cni/net.d"
"""


def containerd_proxy_env() -> dict[str, str]:
    """Every registry request goes through a proxy on a closed loopback port, without a
    name lookup: an image that was not imported (a default image name, a tag the kubelet
    always pulls) fails to pull here instead of reaching for a registry off this machine.
    (containerd 1.6 has no catch-all registry host configuration.)"""
    nowhere = f"http://127.0.0.1:{CLOSED_PORT}"
    proxy = {name: nowhere for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")}
    return {**proxy, "NO_PROXY": "", "no_proxy": ""}


def kubelet_config(work: Path, socket: Path, resolv: Path) -> dict[str, Any]:
    """The KubeletConfiguration: on our bridge's address, with our resolver only."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This machine has cgroup v1 (with v2 mounted beside it).
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{socket}",
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
        "podLogsDir": str(work / "pod-logs"),
        "podCIDR": POD_CIDR,
        "failSwapOn": False,
        "volumePluginDir": str(work / "volume-plugins"),
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


def kube_proxy_config(kubeconfig: str) -> dict[str, Any]:
    """The KubeProxyConfiguration: nftables mode, bound to the node's address."""
    return {
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
