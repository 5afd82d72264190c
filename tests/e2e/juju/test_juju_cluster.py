"""The cluster ``scripts/dev juju-cluster`` starts (devtools/juju_cluster.py) gives what a Juju
controller needs of it, seen on the real control plane and node:

* a StatefulSet's volumeClaimTemplate is bound to a volume of the default StorageClass and its
  pod, running as uid 170 with fsGroup 170 as Juju's controller does, writes to that volume;
* a ``kubernetes.io/service-account-token`` Secret gets a token the API server accepts;
* the kubeconfig verifies the API server with its CA (and a client without that CA fails);
* an image imported with ``--image`` runs with ``IfNotPresent``, and one not imported does not
  (every pull ends at a closed port);
* a pod reaches the API server at ``kubernetes.default.svc``, verifying it with its mounted CA.

The module starts the cluster itself, as the verb does; one node runs per machine, so
tests/e2e/conftest.py orders this module before those of the session's cluster.
"""

from __future__ import annotations

import base64
import logging
import os
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml
from devtools import images
from devtools.cluster import LocalCluster, kube_bin_dir
from devtools.juju_cluster import JUJU_ID, STORAGE_CLASS, juju_cluster
from devtools.node import Node
from lightkube import ApiError, Client, KubeConfig
from lightkube.models.apps_v1 import StatefulSetSpec
from lightkube.models.core_v1 import (
    Container,
    PersistentVolumeClaimSpec,
    PodSecurityContext,
    PodSpec,
    PodTemplateSpec,
    VolumeMount,
    VolumeResourceRequirements,
)
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.core_v1 import (
    Namespace,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    Secret,
    ServiceAccount,
)

pytestmark = pytest.mark.e2e
log = logging.getLogger(__name__)

NS = "juju-cluster-probe"
# A name the node's own images do not use: the import must add it.
IMPORTED_IMAGE = "aitenant.local/imported-pause:1"
NOT_IMPORTED_IMAGE = "aitenant.local/never-imported:1"
T = TypeVar("T")


@dataclass
class Running:
    cluster: LocalCluster
    node: Node
    imported: list[str]
    client: Client
    seconds: float


def eventually(probe: Callable[[], T | None], what: str, timeout: float = 60.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got is not None:
            return got
        time.sleep(0.3)
    raise AssertionError(f"not within {timeout:.0f}s: {what}")


def imported_archive(out: Path) -> Path:
    """The pause program under a name of its own, as an OCI archive like those ``--image``
    takes."""
    layer = images.Layer()
    layer.add("pause", (images.go_binaries() / "pause").read_bytes())
    out.mkdir(parents=True, exist_ok=True)
    return images.write_archive(
        out / "imported-pause.tar", IMPORTED_IMAGE, layer, entrypoint=["/pause"], user="170:170"
    )


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    archive = imported_archive(tmp_path_factory.mktemp("images"))
    began = time.monotonic()
    with juju_cluster([archive]) as (cluster, node, imported):
        seconds = time.monotonic() - began
        log.warning("juju cluster up in %.1f s", seconds)
        print(f"\njuju cluster up in {seconds:.1f} s (images imported: {imported})")
        with Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="juju-probe") as client:
            client.create(Namespace(metadata=ObjectMeta(name=NS)))
            eventually(lambda: default_account(client), "the namespace's default ServiceAccount")
            yield Running(cluster, node, imported, client, seconds)


def default_account(client: Client) -> bool | None:
    return True if any(True for _ in client.list(ServiceAccount, namespace=NS)) else None


def pod_phase(client: Client, name: str) -> str | None:
    pod = client.get(Pod, name, namespace=NS)
    return pod.status.phase if pod.status else None


def running_pod(client: Client, name: str) -> Pod | None:
    pod = client.get(Pod, name, namespace=NS)
    return pod if pod.status and pod.status.phase == "Running" else None


def test_imported_image_names(running: Running) -> None:
    assert running.imported == [IMPORTED_IMAGE]


def test_statefulset_volume_bound_and_writable_as_juju_user(running: Running) -> None:
    client = running.client
    labels = {"app": "probe"}
    curl_image = images.CLEANUP_IMAGE  # Debian's curl: writes a file through file://
    statefulset = StatefulSet(
        metadata=ObjectMeta(name="probe", namespace=NS),
        spec=StatefulSetSpec(
            serviceName="probe",
            replicas=1,
            selector=LabelSelector(matchLabels=labels),
            template=PodTemplateSpec(
                metadata=ObjectMeta(labels=labels),
                spec=PodSpec(
                    # As Juju's controller runs: rootless, fsGroup 170 (which hostPath ignores).
                    securityContext=PodSecurityContext(
                        runAsUser=JUJU_ID, runAsGroup=JUJU_ID, fsGroup=JUJU_ID
                    ),
                    initContainers=[
                        Container(
                            name="write",
                            image=curl_image,
                            imagePullPolicy="IfNotPresent",
                            command=["/usr/bin/curl", "-sS", "-o", "/data/probe"],
                            args=["file:///usr/bin/curl"],
                            volumeMounts=[VolumeMount(name="data", mountPath="/data")],
                        )
                    ],
                    containers=[
                        Container(
                            name="main",
                            image=images.PAUSE_IMAGE,
                            imagePullPolicy="IfNotPresent",
                            volumeMounts=[VolumeMount(name="data", mountPath="/data")],
                        )
                    ],
                ),
            ),
            # No storageClassName: the default class is ours.
            volumeClaimTemplates=[
                PersistentVolumeClaim(
                    metadata=ObjectMeta(name="data"),
                    spec=PersistentVolumeClaimSpec(
                        accessModes=["ReadWriteOnce"],
                        resources=VolumeResourceRequirements(requests={"storage": "1Gi"}),
                    ),
                )
            ],
        ),
    )
    client.create(statefulset)

    def bound() -> PersistentVolumeClaim | None:
        try:
            claim = client.get(PersistentVolumeClaim, "data-probe-0", namespace=NS)
        except ApiError:  # not made yet by the statefulset controller
            return None
        return claim if claim.status and claim.status.phase == "Bound" else None

    claim = eventually(bound, "PVC data-probe-0 Bound")
    assert claim.spec is not None
    assert claim.spec.storageClassName == STORAGE_CLASS
    eventually(lambda: running_pod(client, "probe-0"), "pod probe-0 Running", 90)
    volume = client.get(PersistentVolume, claim.spec.volumeName or "")
    assert volume.spec is not None
    assert volume.spec.hostPath is not None
    written = Path(volume.spec.hostPath.path) / "probe"
    stat = written.stat()
    assert (stat.st_uid, stat.st_gid) == (JUJU_ID, JUJU_ID)
    assert written.read_bytes() == Path("/usr/bin/curl").read_bytes()


def test_service_account_token_secret_populated(running: Running) -> None:
    client = running.client
    client.create(ServiceAccount(metadata=ObjectMeta(name="juju-probe", namespace=NS)))
    client.create(
        Secret(
            metadata=ObjectMeta(
                name="juju-probe-token",
                namespace=NS,
                annotations={"kubernetes.io/service-account.name": "juju-probe"},
            ),
            type="kubernetes.io/service-account-token",
        )
    )

    def filled() -> dict[str, str] | None:
        data = client.get(Secret, "juju-probe-token", namespace=NS).data or {}
        return data if data.get("token") and data.get("ca.crt") else None

    data = eventually(filled, "the token Secret's token")
    token = base64.b64decode(data["token"]).decode()
    ca = base64.b64decode(data["ca.crt"]).decode()
    # The token is signed with the key the API server verifies: it authenticates as the account.
    review = httpx.post(
        f"{running.cluster.server}/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        headers={"Authorization": f"Bearer {token}"},
        verify=ssl.create_default_context(cadata=ca),
    )
    assert review.status_code == 201, review.text
    assert review.json()["status"]["userInfo"]["username"] == (
        f"system:serviceaccount:{NS}:juju-probe"
    )


def kubeconfig_parts(path: Path) -> tuple[dict[str, Any], str]:
    config = yaml.safe_load(path.read_text())
    (entry,) = config["clusters"]
    (user,) = config["users"]
    return entry["cluster"], user["user"]["token"]


def test_kubeconfig_verifies_server_with_its_ca(running: Running) -> None:
    cluster, token = kubeconfig_parts(running.cluster.kubeconfig)
    assert "insecure-skip-tls-verify" not in cluster
    ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
    headers = {"Authorization": f"Bearer {token}"}
    url = f"{cluster['server']}/api/v1/namespaces"
    verified = httpx.get(url, headers=headers, verify=ssl.create_default_context(cadata=ca))
    assert verified.status_code == 200
    assert NS in {item["metadata"]["name"] for item in verified.json()["items"]}
    # Without that CA the same request is refused: verification is on.
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(url, headers=headers, verify=ssl.create_default_context())
    listed = subprocess.run(
        [
            *(str(kube_bin_dir() / "kubectl"), "--kubeconfig", str(running.cluster.kubeconfig)),
            *("get", "namespaces", "-o", "name"),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
    )
    assert f"namespace/{NS}" in listed.stdout.split()


def image_pod(name: str, image: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace=NS),
        spec=PodSpec(
            securityContext=PodSecurityContext(runAsUser=JUJU_ID, runAsGroup=JUJU_ID),
            containers=[Container(name="main", image=image, imagePullPolicy="IfNotPresent")],
        ),
    )


def waiting_reason(client: Client, name: str) -> str | None:
    pod = client.get(Pod, name, namespace=NS)
    statuses = (pod.status.containerStatuses if pod.status else None) or []
    reasons = [s.state.waiting.reason for s in statuses if s.state and s.state.waiting]
    pulling = {"ErrImagePull", "ImagePullBackOff"}
    return next((r for r in reasons if r in pulling), None)


def test_imported_image_runs_if_not_present(running: Running) -> None:
    client = running.client
    client.create(image_pod("imported", IMPORTED_IMAGE))
    client.create(image_pod("not-imported", NOT_IMPORTED_IMAGE))
    eventually(lambda: running_pod(client, "imported"), "the imported image's pod Running", 60)
    eventually(lambda: waiting_reason(client, "not-imported"), "a pull of the other refused")
    assert pod_phase(client, "not-imported") == "Pending"


def test_pods_reach_the_api_server_verifying_its_ca(running: Running) -> None:
    """As Juju's pods do: ``kubernetes.default.svc`` through the node's DNS and the Service,
    verified with the CA mounted in every pod."""
    client = running.client
    account = "/var/run/secrets/kubernetes.io/serviceaccount"
    client.create(
        Pod(
            metadata=ObjectMeta(name="reach", namespace=NS),
            spec=PodSpec(
                restartPolicy="Never",
                securityContext=PodSecurityContext(runAsUser=JUJU_ID, runAsGroup=JUJU_ID),
                containers=[
                    Container(
                        name="main",
                        image=images.CLEANUP_IMAGE,
                        imagePullPolicy="IfNotPresent",
                        command=["/usr/bin/curl", "-sSf", "--cacert", f"{account}/ca.crt"],
                        args=["https://kubernetes.default.svc/version"],
                    )
                ],
            ),
        )
    )

    def ended() -> str | None:
        phase = pod_phase(client, "reach")
        return phase if phase in ("Succeeded", "Failed") else None

    assert eventually(ended, "the pod's curl to end", 60) == "Succeeded"
