"""The tenant platform really runs, on the session's node (devtools/node.py): what only
a running maas-api pod shows. Nobody of ours writes a Deployment's status; the deployment
controller does, from what the kubelet reports. maas-api is the stand-in of ``tools/images``
(devtools/images.py), run from the images the harness builds.

The controller runs on this machine, not in a pod: it reaches a tenant's maas-api through
the tenant's Service as a pod would, the Service's ClusterIP through kube-proxy's rules, with
the Service's DNS name checked against the certificate (``ServiceAddresses``, in
maas_api_pods.py with the other helpers).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from cryptography import x509
from devtools import images, samples
from devtools.cluster import LocalCluster
from devtools.maas_api import FakeMaasApi
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import CronJob, Job
from lightkube.resources.core_v1 import Service

from aitenant import contract
from aitenant.platform import kinds
from aitenant.resources import AITenant

from ..harness import (
    INFRA_NS,
    RunningController,
    eventually,
)
from ..tenants import Names, get_tenant, make_tenant, ready
from .maas_api_pods import (
    END_CERT,
    POD_READY_TIMEOUT,
    ServiceAddresses,
    active_tenant,
    call_pod,
    container_process,
    delete_tenant,
    maas_api_pod,
    maas_api_pods,
    own_aitenant_namespace,
    pod_ready,
    process_facts,
    serving_secret,
    start_controller,
    tenant_gone,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
async def node_controller(
    cluster: LocalCluster, kube: AsyncClient, controller: RunningController, maas_api: FakeMaasApi
) -> AsyncIterator[tuple[RunningController, ServiceAddresses]]:
    """In the session controller's place for this module: the same settings and CA (no
    tenant's pods roll), revocations sent to the tenants' Services."""
    await controller.stop()
    running, transport = await start_controller(cluster, kube, maas_api)
    try:
        yield running, transport
    finally:
        await running.stop()
        await transport.aclose()
        await controller.start()


async def test_maas_api_pod_runs_as_rendered_and_is_ready_through_its_https_probes(
    cluster: LocalCluster,
    kube: AsyncClient,
    node_controller: tuple[RunningController, ServiceAddresses],
    maas_api: FakeMaasApi,
    unique: Names,
) -> None:
    name = unique("runs")
    began = time.monotonic()
    tenant = await active_tenant(kube, name)
    logging.getLogger(__name__).warning(
        "tenant %s: created to Active in %.1f s", name, time.monotonic() - began
    )
    assert ready(tenant)["status"] == "True"
    pod = await maas_api_pod(kube, name)
    assert pod_ready(pod)
    status = pod["status"]["containerStatuses"][0]
    assert status["ready"]
    assert status["restartCount"] == 0
    assert "running" in status["state"]
    assert status["image"] == images.maas_api_image()
    # The kubelet, not us, made the Deployment Available: no status write of ours.
    deployment = await kube.get(kinds.DEPLOYMENT.resource, f"maas-api-{name}", namespace=INFRA_NS)
    managers = {
        (f["manager"], f.get("subresource")) for f in deployment["metadata"]["managedFields"]
    }
    assert ("kube-controller-manager", "status") in managers, managers
    assert all(m != "aitenant-tests" for m, _ in managers), managers

    # What the kubelet made of our securityContext: a non-root user, a read-only root.
    uids, mounts, capabilities = process_facts(container_process(cluster, pod))
    assert all(u != 0 for u in uids), uids
    assert "ro" in mounts["/"], mounts
    # The serving-certificate volume, read-only, where TLS_CERT and TLS_KEY point.
    assert "ro" in mounts["/etc/maas-api/tls"], mounts
    assert capabilities == 0

    # It serves the certificate we issued, for its Service's name, on the pod's address.
    secret = await serving_secret(kube, name)
    response = await call_pod(pod, maas_api.ca_file, "GET", "/health")
    assert response.status_code == 200
    assert response.json() == {"status": "healthy"}
    served = ssl.get_server_certificate((pod["status"]["podIP"], 8443))
    issued = secret["tls.crt"].decode().split(END_CERT)[0] + END_CERT
    assert ssl.PEM_cert_to_DER_cert(served) == ssl.PEM_cert_to_DER_cert(issued)


async def test_the_key_cleanup_cronjob_run_once_completes_against_maas_api(
    kube: AsyncClient,
    node_controller: tuple[RunningController, ServiceAddresses],
    maas_api: FakeMaasApi,
    unique: Names,
) -> None:
    name = unique("cleanup")
    await active_tenant(kube, name)
    cronjobs = [
        c
        async for c in kube.list(
            CronJob, namespace=INFRA_NS, labels={contract.LABEL_TENANT_NAME: name}
        )
    ]
    assert len(cronjobs) == 1
    cron = cronjobs[0]
    assert cron.metadata is not None
    assert cron.spec is not None
    # What `kubectl create job --from=cronjob/...` makes.
    job = Job(
        metadata=ObjectMeta(
            name=f"{cron.metadata.name}-once",
            namespace=INFRA_NS,
            annotations={"cronjob.kubernetes.io/instantiate": "manual"},
            labels=cron.spec.jobTemplate.metadata.labels
            if cron.spec.jobTemplate.metadata
            else None,
        ),
        spec=cron.spec.jobTemplate.spec,
    )
    await kube.create(job)
    job_name = f"{cron.metadata.name}-once"

    async def finished() -> Job | None:
        got = await kube.get(Job, job_name, namespace=INFRA_NS)
        st = got.status
        if st is not None and (st.succeeded or st.failed):
            return got
        return None

    done = cast(Job, await eventually(finished, timeout=POD_READY_TIMEOUT, interval=0.5))
    assert done.status is not None
    assert done.status.succeeded == 1, done.status  # curl --fail: maas-api answered 2xx
    if images.runs_real_maas_api():
        return  # it keeps no record of its calls
    pod = await maas_api_pod(kube, name)
    calls = (await call_pod(pod, maas_api.ca_file, "GET", "/standin/v1/calls")).json()
    assert {"method": "POST", "path": "/internal/v1/api-keys/cleanup", "status": 200} in calls


async def test_deleting_a_tenant_revokes_its_keys_through_its_service(
    kube: AsyncClient,
    node_controller: tuple[RunningController, ServiceAddresses],
    maas_api: FakeMaasApi,
    unique: Names,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, transport = node_controller
    name = unique("revoke")
    await active_tenant(kube, name)
    pod = await maas_api_pod(kube, name)
    # Keys to revoke: the stand-in makes them on request; the real maas-api's own API for it
    # needs a user's token and an access review, so with it there are none (it answers 0).
    keys = 0 if images.runs_real_maas_api() else 2
    for _ in range(keys):
        made = await call_pod(pod, maas_api.ca_file, "POST", f"/standin/v1/tenants/{name}/api-keys")
        assert made.status_code == 201
    svc = await kube.get(Service, f"maas-api-{name}", namespace=INFRA_NS)
    assert svc.spec is not None
    caplog.set_level(logging.INFO, logger="aitenant.controllers.aitenant.deletion")
    await delete_tenant(kube, name)
    assert svc.spec.clusterIP in transport.sent_to
    assert any(f"{name}: revoked {keys} API keys" in r.getMessage() for r in caplog.records), [
        r.getMessage() for r in caplog.records
    ]


async def test_a_new_certificate_rolls_the_pods_and_the_gateway_drops_the_old_ca_after(
    tmp_path: Path,
    cluster: LocalCluster,
    kube: AsyncClient,
    maas_api: FakeMaasApi,
    node_controller: tuple[RunningController, ServiceAddresses],
    unique: Names,
) -> None:
    """The charm rotates the maas-api CA: the serving certificate is reissued, the pods roll
    (they read it only at start), and the Gateway's CA bundle (docs/platform.md §12) drops the
    old CA only once no Ready pod serves a certificate of it."""
    name = unique("roll")
    ca_file, ca_key_file = samples.write_ca(tmp_path / "ca")
    bundle_name = f"maas-api-{name}-backend-ca"
    async with own_aitenant_namespace(kube, node_controller, unique("custom-infra-roll")) as ns:
        own, transport = await start_controller(
            cluster,
            kube,
            maas_api,
            aitenant_namespace=ns,
            maas_api_ca_file=ca_file,
            maas_api_ca_key_file=ca_key_file,
        )
        try:
            await active_tenant(kube, name, ns)
            old_pod = await maas_api_pod(kube, name)
            old_ca = x509.load_pem_x509_certificate(ca_file.read_bytes())

            await own.stop()
            samples.write_ca(tmp_path / "ca")
            new_ca = x509.load_pem_x509_certificate(ca_file.read_bytes())
            await own.start()

            # Until the tenant is Active again: what the Gateway trusts beside what the pods
            # serve, as (CAs trusted, old trusted, old pod Ready).
            seen: list[tuple[int, bool, bool]] = []
            deadline = asyncio.get_running_loop().time() + POD_READY_TIMEOUT
            while asyncio.get_running_loop().time() < deadline:
                configmap = await kube.get(
                    kinds.CONFIG_MAP.resource, bundle_name, namespace=INFRA_NS
                )
                trusted = x509.load_pem_x509_certificates(configmap["data"]["ca.crt"].encode())
                pods = await maas_api_pods(kube, name)
                # The old pod may still serve: Ready and not yet terminating (a terminating
                # pod leaves the Service's ready endpoints, so no Gateway sends to it).
                old_ready = any(
                    p["metadata"]["name"] == old_pod["metadata"]["name"]
                    and pod_ready(p)
                    and not p["metadata"].get("deletionTimestamp")
                    for p in pods
                )
                seen.append((len(trusted), old_ca in trusted, old_ready))
                tenant = await get_tenant(kube, name, ns)
                if trusted == [new_ca] and (tenant.get("status") or {}).get("phase") == "Active":
                    break
                await asyncio.sleep(0.2)
            assert seen[-1][:2] == (1, False), seen
            # Both CAs were trusted while the old pod still served, never the new alone then.
            assert (2, True, True) in seen, seen
            assert not any(not old_trusted and old_ready for _, old_trusted, old_ready in seen)

            new_pod = await maas_api_pod(kube, name)
            assert new_pod["metadata"]["name"] != old_pod["metadata"]["name"]
            response = await call_pod(new_pod, ca_file, "GET", "/health")
            assert response.status_code == 200
            await delete_tenant(kube, name, ns)
        finally:
            await own.stop()
            await transport.aclose()


async def test_a_crash_looping_maas_api_leaves_the_tenant_not_active_and_says_why(
    cluster: LocalCluster,
    kube: AsyncClient,
    maas_api: FakeMaasApi,
    node_controller: tuple[RunningController, ServiceAddresses],
    unique: Names,
) -> None:
    name = unique("crash")
    async with own_aitenant_namespace(kube, node_controller, unique("custom-infra-crash")) as ns:
        # Long enough to see the deletion blocked, short enough to see it forced in the end.
        crashing, transport = await start_controller(
            cluster,
            kube,
            maas_api,
            image=images.MAAS_API_CRASHLOOP_IMAGE,
            aitenant_namespace=ns,
            deletion_timeout=20.0,
        )
        try:
            await make_tenant(kube, name, namespace=ns)

            async def restarted() -> dict[str, Any] | None:
                pod = await maas_api_pod(kube, name)
                statuses = pod["status"].get("containerStatuses") or []
                return pod if statuses and statuses[0]["restartCount"] >= 1 else None

            await eventually(restarted, timeout=POD_READY_TIMEOUT, interval=0.5)

            # The tenant says why, in the kubelet's words, through its config's condition.
            async def says_why() -> dict[str, Any] | None:
                tenant = await get_tenant(kube, name, ns)
                message = ready(tenant).get("message", "")
                return tenant if "CrashLoopBackOff" in message else None

            tenant = await eventually(says_why, timeout=POD_READY_TIMEOUT, interval=0.5)
            assert tenant["status"]["phase"] == "Pending"
            cond = ready(tenant)
            assert cond["status"] == "False"
            assert cond["reason"] == "TenantConfigNotReady", cond
            assert cond["message"].startswith(
                "waiting for MaasTenantConfig to report Ready: MaaSAPINotAvailable: "
                f"waiting for Deployment {INFRA_NS}/maas-api-{name} to become available: pod "
            ), cond
            # With what it logged last (the kubelet's termination message from its log).
            assert cond["message"].endswith(
                "container maas-api CrashLoopBackOff, last exited with code 1: "
                "maas-api stand-in: exiting at start (--exit-at-start)"
            ), cond

            # Deleting it while maas-api is down: revocation cannot reach the pod, and the
            # tenant says so (it keeps its finalizer until then or the deletion timeout).
            await kube.delete(AITenant, name, namespace=ns)

            async def blocked() -> dict[str, Any] | None:
                cond = ready(await get_tenant(kube, name, ns))
                return cond if cond.get("reason") == "DeletionBlocked" else None

            cond = await eventually(blocked, timeout=60, interval=0.5)
            assert f"maas-api-{name}.{INFRA_NS}.svc:8443" in cond["message"], cond
            # The deletion timeout forces it through (docs/contract.md §5.5), platform and all.
            await tenant_gone(kube, name, ns)

            async def no_pods() -> bool:
                return not await maas_api_pods(kube, name)

            await eventually(no_pods, timeout=POD_READY_TIMEOUT, interval=0.5)
        finally:
            await crashing.stop()
            await transport.aclose()
