"""What ``scripts/dev juju-cluster`` asks of the control plane, without starting one
(tests/e2e/juju/test_juju_cluster.py sees it on the real cluster)."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml
from devtools.cluster import LocalCluster
from devtools.juju_cluster import (
    JUJU_CONTROLLER_SUBPATHS,
    JUJU_CONTROLLERS,
    JUJU_ID,
    STORAGE_CLASS,
    VOLUMES,
    make_volume_dirs,
    storage_objects,
)
from devtools.node import NODE_CONTROLLERS, NODE_IP


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def test_token_controller_signs_with_the_api_servers_key(tmp_path: Path) -> None:
    cluster = LocalCluster(controllers=JUJU_CONTROLLERS, pods_reach_at=NODE_IP, workdir=tmp_path)
    args = cluster._controller_manager_args(tmp_path, tmp_path / "sa.key")
    controllers = (flag(args, "--controllers") or "").split(",")
    for needed in ("statefulset", "persistentvolume-binder", "endpoint", "serviceaccount-token"):
        assert needed in controllers
    assert flag(args, "--service-account-private-key-file") == str(tmp_path / "sa.key")
    assert flag(args, "--root-ca-file") == str(cluster.ca_file)


def test_the_e2e_node_cluster_keeps_its_controllers(tmp_path: Path) -> None:
    cluster = LocalCluster(controllers=NODE_CONTROLLERS, workdir=tmp_path)
    args = cluster._controller_manager_args(tmp_path, tmp_path / "sa.key")
    assert flag(args, "--controllers") == NODE_CONTROLLERS
    assert flag(args, "--service-account-private-key-file") is None


def test_kubeconfig_carries_the_ca_when_asked(tmp_path: Path) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "apiserver.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    trusted = LocalCluster(verify_server=True, workdir=tmp_path, api_port=6443)
    (entry,) = yaml.safe_load(trusted._write_kubeconfig().read_text())["clusters"]
    assert set(entry["cluster"]) == {"server", "certificate-authority-data"}
    ca = base64.b64decode(entry["cluster"]["certificate-authority-data"])
    assert ca == b"-----BEGIN CERTIFICATE-----\n"
    skipping = LocalCluster(workdir=tmp_path, api_port=6443)
    (entry,) = yaml.safe_load(skipping._write_kubeconfig().read_text())["clusters"]
    assert entry["cluster"]["insecure-skip-tls-verify"] is True


def test_storage_is_a_default_class_with_its_volumes(tmp_path: Path) -> None:
    storage_class, *volumes = storage_objects(tmp_path)
    annotations = storage_class["metadata"]["annotations"]  # type: ignore[index]
    assert annotations["storageclass.kubernetes.io/is-default-class"] == "true"
    assert len(volumes) == VOLUMES
    paths = {v["spec"]["hostPath"]["path"] for v in volumes}  # type: ignore[index]
    assert len(paths) == VOLUMES
    assert all(Path(p).parent == tmp_path for p in paths)
    assert {v["spec"]["storageClassName"] for v in volumes} == {STORAGE_CLASS}  # type: ignore[index]


def test_volumes_fit_and_let_juju_s_rootless_controller_write(tmp_path: Path) -> None:
    # Juju's controller claims 20Gi by default and mounts a subPath the kubelet would make as root.
    _, *volumes = storage_objects(tmp_path)
    capacities = {v["spec"]["capacity"]["storage"] for v in volumes}  # type: ignore[index]
    assert all(int(c.removesuffix("Gi")) >= 20 for c in capacities)
    make_volume_dirs(tmp_path, count=2)
    for index in range(2):
        for sub in ("", *JUJU_CONTROLLER_SUBPATHS):
            stat = (tmp_path / f"pv-{index}" / sub).stat()
            assert (stat.st_uid, stat.st_gid) == (JUJU_ID, JUJU_ID)
