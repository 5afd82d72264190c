"""A local cluster a Juju 4.0 controller can be bootstrapped onto: ``scripts/dev juju-cluster``.

The control plane and node the e2e suite runs on (devtools/cluster.py, devtools/node.py), with
what a Juju controller needs of a cluster beyond what our tests do:

- kube-controller-manager's ``statefulset`` (the controller is a StatefulSet),
  ``persistentvolume-binder``, ``pvc-protection`` and ``pv-protection`` (its storage),
  ``endpoint`` (Endpoints beside the node's EndpointSlices) and ``serviceaccount-token`` with
  the API server's signing key (a ``kubernetes.io/service-account-token`` Secret gets its token,
  as Juju's API-server port-forward waits for);
- StorageClass ``aitenant-local`` (the default, no provisioner) and ``VOLUMES``
  hostPath PersistentVolumes under the run's directory, owned by uid and gid ``JUJU_ID``: the
  controller runs as that user with that fsGroup, which a hostPath volume ignores;
- a kubeconfig that verifies the API server with its CA (certificate-authority-data) and
  authenticates with the admin token;
- pods reaching the API server at the node's address (``LocalCluster.pods_reach_at``);
- the OCI archives given with ``--image`` imported into the node's containerd (``k8s.io``), so
  pods with ``imagePullPolicy: IfNotPresent`` run them without a pull (every pull ends at a
  closed loopback port: devtools/node.py).

Nothing of Juju is here: a user (or a test) bootstraps their own Juju onto it with the printed
kubeconfig. It runs until Ctrl-C, then stops the node (removing its pods, mounts, network
namespaces, bridge, routes and rules) and the control plane, and removes the run's directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import yaml

from devtools.cluster import LocalCluster, kube_bin_dir
from devtools.node import NODE_CONTROLLERS, NODE_IP, Node

JUJU_CONTROLLERS = (
    f"{NODE_CONTROLLERS},statefulset,persistentvolume-binder,pvc-protection,pv-protection,"
    "endpoint,serviceaccount-token"
)
STORAGE_CLASS = "aitenant-local"
VOLUMES = 8
# hostPath enforces no size; Juju's controller claims 20Gi unless given a root-disk constraint.
VOLUME_SIZE = "32Gi"
# The user and group Juju's controller runs as (its pod's fsGroup too).
JUJU_ID = 170
# The subPath Juju's controller pod mounts from its volume. The kubelet creates a missing subPath
# as root, and fsGroup does not reach hostPath, so the rootless controller could not write it.
JUJU_CONTROLLER_SUBPATHS = ("agents/controller-0",)
VOLUME_LABEL = "aitenant.local/volume"
READY_TIMEOUT = 60.0


def kubectl(cluster: LocalCluster) -> list[str]:
    return [str(kube_bin_dir() / "kubectl"), "--kubeconfig", str(cluster.kubeconfig)]


def volumes_dir(cluster: LocalCluster) -> Path:
    assert cluster.workdir is not None
    return cluster.workdir / "volumes"


def storage_objects(root: Path, count: int = VOLUMES) -> list[dict[str, object]]:
    """The StorageClass (default, no provisioner: volumes are bound, never made) and ``count``
    hostPath PersistentVolumes under ``root``, one directory each."""
    storage_class: dict[str, object] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "kubernetes.io/no-provisioner",
        "reclaimPolicy": "Retain",
        # One node: a claim is bound at once, before a pod is scheduled.
        "volumeBindingMode": "Immediate",
    }
    volumes: list[dict[str, object]] = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": f"{STORAGE_CLASS}-{index}",
                "labels": {VOLUME_LABEL: STORAGE_CLASS},
            },
            "spec": {
                "capacity": {"storage": VOLUME_SIZE},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": STORAGE_CLASS,
                "hostPath": {"path": str(root / f"pv-{index}"), "type": "Directory"},
            },
        }
        for index in range(count)
    ]
    return [storage_class, *volumes]


def make_volume_dirs(root: Path, count: int = VOLUMES) -> None:
    """Each volume's directory, owned by ``JUJU_ID`` and writable by its group."""
    for index in range(count):
        path = root / f"pv-{index}"
        for directory in (path, *(path / sub for sub in JUJU_CONTROLLER_SUBPATHS)):
            directory.mkdir(parents=True, exist_ok=True)
        for directory in (path, *path.rglob("*")):
            os.chown(directory, JUJU_ID, JUJU_ID)
            directory.chmod(0o775)


def apply(cluster: LocalCluster, objects: Sequence[dict[str, object]]) -> None:
    body = yaml.safe_dump_all(objects).encode()
    subprocess.run(
        [*kubectl(cluster), "apply", "--server-side", "-f", "-"],
        input=body,
        check=True,
        capture_output=True,
    )


def volumes_available(cluster: LocalCluster) -> bool:
    """Every volume of ours is ``Available`` (the persistentvolume-binder controller runs)."""
    got = subprocess.run(
        [*kubectl(cluster), "get", "pv", "-l", VOLUME_LABEL, "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if got.returncode != 0:
        return False
    items = json.loads(got.stdout)["items"]
    phases = [(pv.get("status") or {}).get("phase") for pv in items]
    return len(items) == VOLUMES and all(phase == "Available" for phase in phases)


def wait_volumes(cluster: LocalCluster, timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not volumes_available(cluster):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the PersistentVolumes of {STORAGE_CLASS} not Available")
        time.sleep(0.3)


def image_names(node: Node) -> set[str]:
    listed = subprocess.run(
        ["ctr", "--address", str(node.containerd_socket), "-n", "k8s.io", "images", "ls", "-q"],
        check=True,
        capture_output=True,
        text=True,
    )
    return set(listed.stdout.split())


def import_images(node: Node, archives: Sequence[Path]) -> list[str]:
    """Import each OCI (or Docker) archive into the node's containerd; the image names each
    added. An archive that names no image (ctr then imports it under no name) is an error:
    nothing could run it."""
    added: list[str] = []
    for archive in archives:
        if not archive.is_file():
            raise FileNotFoundError(f"--image {archive}: no such file")
        before = image_names(node)
        done = subprocess.run(
            [
                *("ctr", "--address", str(node.containerd_socket), "-n", "k8s.io"),
                *("images", "import", str(archive)),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"ctr images import {archive}: {done.stderr.strip()}")
        # The CRI also lists an image by its id (sha256:...) and digest (name@sha256:...).
        new = sorted(n for n in image_names(node) - before if "sha256:" not in n)
        if not new:
            raise RuntimeError(f"{archive}: imported, but it names no image (or a present one)")
        added += new
    return added


@contextlib.contextmanager
def juju_cluster(archives: Sequence[Path] = ()) -> Iterator[tuple[LocalCluster, Node, list[str]]]:
    """The cluster, its node and the names of the images imported from ``archives``, once all
    is ready; stopped (node first) when the block ends."""
    with LocalCluster(
        controllers=JUJU_CONTROLLERS, pods_reach_at=NODE_IP, verify_server=True
    ) as cluster:
        node = Node(cluster)
        node.start()
        try:
            names = import_images(node, archives)
            make_volume_dirs(volumes_dir(cluster))
            apply(cluster, storage_objects(volumes_dir(cluster)))
            wait_volumes(cluster)
            yield cluster, node, names
        finally:
            stop_node(node)


def stop_node(node: Node) -> None:
    """Stop the node with Ctrl-C and SIGTERM held off: a half-stopped node would leave its
    bridge, routes and nftables table behind (its stop is bounded by its own timeouts)."""
    in_main = threading.current_thread() is threading.main_thread()
    held = (
        {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
        if in_main
        else {}
    )
    try:
        node.stop()
    finally:
        for sig, previous in held.items():
            signal.signal(sig, previous)


def hints(cluster: LocalCluster, names: Sequence[str]) -> str:
    imported = ", ".join(names) if names else "none (--image TAR imports an OCI archive)"
    return "\n".join(
        [
            f"Kubeconfig: {cluster.kubeconfig}",
            f"  export KUBECONFIG={cluster.kubeconfig}",
            f"  {kube_bin_dir() / 'kubectl'} get nodes,storageclass,pv",
            f"Storage: StorageClass {STORAGE_CLASS} (the default), {VOLUMES} x {VOLUME_SIZE} "
            f"hostPath volumes owned by {JUJU_ID}:{JUJU_ID} under {volumes_dir(cluster)}",
            f"Images in the node's containerd (k8s.io): {imported}",
            f"  juju add-k8s <cloud> --client --storage {STORAGE_CLASS}",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--image",
        action="append",
        type=Path,
        default=[],
        metavar="TAR",
        help="an OCI archive to import into the node's containerd (repeatable)",
    )
    args = parser.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    began = time.monotonic()
    print("Starting the control plane, the node and the storage...")
    try:
        with juju_cluster(args.image) as (cluster, _node, names):
            print(f"Cluster up in {time.monotonic() - began:.1f}s at {cluster.server}")
            print(hints(cluster, names))
            print("Running; press Ctrl-C to stop the node and the control plane.")
            while not stop.wait(1):
                pass
            print("Stopping the node (its pods, containerd, bridge, routes, rules)...")
    except (RuntimeError, TimeoutError, OSError, subprocess.CalledProcessError) as exc:
        print(f"juju-cluster: {exc}", file=sys.stderr)
        return 1
    print("Stopped; the run's files are removed.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
