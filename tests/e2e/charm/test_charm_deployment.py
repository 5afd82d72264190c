"""The charm deployed on a real API server: CA switches, COS scrape and rules, teardown.

The charm runs under Harness with a lightkube client on this module's own control plane, whose
API server resolves the charm's Service-referenced webhook through the Service's endpoints (as
a cluster network would: Endpoints up to 1.32, EndpointSlices since 1.33) and verifies the
serving certificate against the published caBundle for ``<app>.<model>.svc``. The controller is
the command the charm planned for Pebble, run as a process under the app's service account.

- While the charm switches the webhook's CA (internal CA rotation, certificates relation added,
  then removed), a task sends AITenant creations through the API server (server-side dry runs:
  admission runs, nothing is stored) and counts every refusal; it also records how many CAs
  caBundle holds.
- Debian's Prometheus scrapes the controller's /metrics (on loopback, for a bounded time) and
  evaluates every alert rule the charm ships; promtool checks the rule file.
- The prepare-removal action stops the controller and releases the finalizers, after which
  deleting a tenant completes at once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import json
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from charmlibs.interfaces.tls_certificates import (
    Certificate,
    CertificateSigningRequest,
    PrivateKey,
)
from devtools import crds, samples
from devtools.cluster import LocalCluster, User, free_port
from lightkube import ApiError, AsyncClient, Client, KubeConfig
from lightkube.models import core_v1, discovery_v1
from lightkube.models.core_v1 import ServicePort, ServiceSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Endpoints, Namespace, Service
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding, Role
from ops import testing

import charm
from aitenant import contract
from aitenant.resources import AITenant
from aitenant_charm import api_server_writes, cos, lightkube_private, pki, webhook_trust
from aitenant_charm.cluster_manifests import CHARM_LABELS, cluster_scoped_name
from aitenant_charm.internal_ca import INTERNAL_CA_LABEL
from aitenant_charm.workload import CONTAINER, WEBHOOK_PORT
from charm import AITenantCharm

from ..conftest import eventually
from .charm_harness import APP, CharmThread, PlannedController, relate_maas_api

MODEL = "aitenant-model"  # the model's namespace, where Juju puts the app's Service
AITENANT_NS = "ai-tenants"  # the charm's default `aitenant-namespace`
# The app's service account: the controller runs as it; the charm binds its ClusterRole.
APP_USER = User(
    f"system:serviceaccount:{MODEL}:{APP}",
    "aitenant-app-token",
    ("system:serviceaccounts", f"system:serviceaccounts:{MODEL}"),
)
PROVIDER = "self-signed-certificates"


def host_address() -> str:
    """An address of this machine other than loopback (the API server refuses loopback
    endpoints). Connecting a UDP socket sends nothing; it only picks the interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))
        address = probe.getsockname()[0]
    assert not address.startswith("127."), "this test needs a non-loopback IPv4 address"
    return address


@pytest.fixture(scope="module")
def ca_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(extra_users=[APP_USER], aggregator_routing=True) as local:
        yield local


def bundle_of(vwc: ValidatingWebhookConfiguration) -> str:
    """The PEM caBundle of the (first) webhook."""
    webhooks = vwc.webhooks or []
    return base64.b64decode(webhooks[0].clientConfig.caBundle or "").decode() if webhooks else ""


@dataclass
class Tally:
    """Admissions sent during one switch, and what the API server answered."""

    allowed: int = 0
    refused: list[str] = field(default_factory=list)
    bundle_sizes: set[int] = field(default_factory=set)


class Probe:
    """Sends a dry-run AITenant create every 50 ms and samples the published caBundle."""

    def __init__(self, kube: AsyncClient) -> None:
        self.kube = kube
        self.tally = Tally()
        self._task: asyncio.Task[None] | None = None
        self._count = 0

    async def once(self) -> bool:
        self._count += 1
        body = samples.aitenant(f"probe-{self._count}", AITENANT_NS)
        try:
            await self.kube.create(AITenant.from_dict(body), dry_run=True)
        except ApiError as exc:
            self.tally.refused.append(exc.status.message or str(exc.status.code))
            return False
        self.tally.allowed += 1
        return True

    async def _run(self) -> None:
        name = cluster_scoped_name(APP, MODEL)
        while True:
            await self.once()
            with contextlib.suppress(ApiError):
                vwc = await self.kube.get(ValidatingWebhookConfiguration, name)
                pem = bundle_of(vwc)
                self.tally.bundle_sizes.add(len(pki.split_pem(pem)))
            await asyncio.sleep(0.05)

    def start(self) -> Tally:
        self.tally = Tally()
        self._task = asyncio.create_task(self._run())
        return self.tally

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


@dataclass
class Deployment:
    charm: CharmThread
    controller: PlannedController
    kube: AsyncClient

    @property
    def harness(self) -> testing.Harness[AITenantCharm]:
        return self.charm.harness

    async def hook(self, fire: Callable[[], Any]) -> None:
        """Run one Juju event in the charm's thread (the charm may wait on the workload
        meanwhile), then let 'Pebble' apply the plan."""
        await self.charm.run(fire)
        await self.controller.sync()

    async def pushed_tls(self) -> tuple[str, str]:
        """The certificate the charm wrote for the workload, and its CA bundle."""

        def read() -> tuple[str, str]:
            tls = self.harness.charm._webhook_tls()  # pyright: ignore[reportPrivateUsage]
            assert tls is not None
            return tls.cert_pem, tls.ca_bundle_pem

        return await self.charm.run(read)

    async def published_bundle(self) -> str:
        name = cluster_scoped_name(APP, MODEL)
        return bundle_of(await self.kube.get(ValidatingWebhookConfiguration, name))

    async def settled(self) -> bool:
        """The workload serves the charm's certificate and caBundle holds only its CA(s)."""
        cert, bundle = await self.pushed_tls()
        served = await asyncio.to_thread(
            webhook_trust.served_certificate, "127.0.0.1", WEBHOOK_PORT
        )
        if served is None or not pki.same_certificate(served, cert):
            return False
        published = await self.published_bundle()
        if published.strip() == bundle.strip():
            return True
        # The hook stopped waiting before the reload: a later event drops the old CA.
        await self.hook(self.harness.charm.on.update_status.emit)
        return False


async def expose_webhook(kube: AsyncClient) -> None:
    """What Juju and the cluster provide: the app's Service, and its endpoints on this machine
    (the API server resolves through Endpoints up to 1.32 and EndpointSlices since 1.33)."""
    port = WEBHOOK_PORT
    await kube.create(
        Service(
            metadata=ObjectMeta(name=APP, namespace=MODEL),
            spec=ServiceSpec(ports=[ServicePort(name="webhook", port=port, targetPort=port)]),
        )
    )
    address = host_address()
    await kube.create(
        Endpoints(
            metadata=ObjectMeta(name=APP, namespace=MODEL),
            subsets=[
                core_v1.EndpointSubset(
                    addresses=[core_v1.EndpointAddress(ip=address)],
                    ports=[core_v1.EndpointPort(name="webhook", port=port)],
                )
            ],
        )
    )
    await kube.create(
        EndpointSlice(
            metadata=ObjectMeta(
                name=f"{APP}-unit",
                namespace=MODEL,
                labels={"kubernetes.io/service-name": APP},
            ),
            addressType="IPv4",
            endpoints=[discovery_v1.Endpoint(addresses=[address])],
            ports=[discovery_v1.EndpointPort(name="webhook", port=port, protocol="TCP")],
        )
    )


@pytest.fixture(scope="module")
async def deployment(ca_cluster: LocalCluster) -> AsyncIterator[Deployment]:
    kube = AsyncClient(KubeConfig.from_file(ca_cluster.kubeconfig), field_manager="tests")
    # The gateway namespace exists wherever a Gateway is deployed; the charm applies a Role there.
    for namespace in (MODEL, AITENANT_NS, "gateways"):
        await samples.ensure_namespace(kube, namespace)
    await samples.install_crds(kube, crds.third_party_and_stand_ins())
    await expose_webhook(kube)
    assert ca_cluster.workdir is not None
    async with CharmThread(ca_cluster.kubeconfig, MODEL).begun() as charm_thread:

        def deploy() -> None:
            harness = charm_thread.harness
            harness.update_config(
                {"gateway-namespace": "gateways", "gateway-name": "maas-default-gateway"}
            )
            relate_maas_api(harness, MODEL)
            harness.container_pebble_ready(CONTAINER)

        await charm_thread.run(deploy)
        controller = PlannedController(
            charm_thread,
            ca_cluster.kubeconfig_for(APP_USER),
            ca_cluster.workdir / "controller.log",
        )
        await controller.start()
        await eventually(controller.ready, timeout=60, interval=0.2)
        try:
            with controller.stopped_with_pebble():
                yield Deployment(charm_thread, controller, kube)
        finally:
            await controller.stop()
            await kube.close()


async def switch(
    deployed: Deployment, action: Callable[[], Awaitable[None]], timeout: float = 90
) -> Tally:
    """Count admissions from before ``action`` until the switch has settled."""
    probe = Probe(deployed.kube)
    await eventually(probe.once, timeout=60)  # the webhook answers before we start counting
    before = await deployed.pushed_tls()
    tally = probe.start()
    try:
        await action()
        assert await deployed.pushed_tls() != before, "the action did not switch the certificate"
        await eventually(deployed.settled, timeout=timeout, interval=0.5)
        for _ in range(10):  # a few more admissions against the settled configuration
            await probe.once()
    finally:
        await probe.stop()
    return tally


def report(kind: str, tally: Tally) -> None:
    x509 = sum("x509" in message for message in tally.refused)
    refused = sum("connection refused" in message for message in tally.refused)
    print(
        f"\n{kind}: {tally.allowed} admitted, {len(tally.refused)} refused "
        f"({x509} x509, {refused} connection refused), "
        f"caBundle sizes seen {sorted(tally.bundle_sizes)}"
    )


def provide_certificate(harness: testing.Harness[AITenantCharm], relation_id: int) -> None:
    """The provider's side: sign the unit's CSR with a CA of its own and publish it."""
    now = datetime.datetime.now(datetime.UTC)
    provider_ca = pki.generate_ca("provider CA", now=now)
    requests = harness.get_relation_data(relation_id, harness.model.unit.name)
    csr_pem = json.loads(requests["certificate_signing_requests"])[0]["certificate_signing_request"]
    signed = CertificateSigningRequest.from_string(csr_pem).sign(
        ca=Certificate.from_string(provider_ca.cert_pem),
        ca_private_key=PrivateKey.from_string(provider_ca.key_pem),
        validity=datetime.timedelta(days=30),
    )
    provided = {
        "ca": provider_ca.cert_pem,
        "certificate_signing_request": csr_pem,
        "certificate": str(signed),
        "chain": [str(signed), provider_ca.cert_pem],
    }
    harness.update_relation_data(relation_id, PROVIDER, {"certificates": json.dumps([provided])})


async def test_webhook_ca_switches_refuse_no_admission(deployment: Deployment):
    harness = deployment.harness
    results: dict[str, Tally] = {}

    # 1. Internal CA rotation: the CA is due (a tenth of its life left), update-status
    #    rotates it and re-issues the webhook certificate from the new CA.
    async def rotate() -> None:
        due = pki.generate_ca(
            "due CA",
            now=datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=330),
        )

        def replace() -> None:
            secret = harness.model.get_secret(label=INTERNAL_CA_LABEL)
            secret.set_content({"ca-cert": due.cert_pem, "ca-key": due.key_pem})

        await deployment.hook(replace)
        await deployment.hook(harness.charm.on.update_status.emit)

    results["internal CA rotation"] = await switch(deployment, rotate)

    # 2. The certificates relation is added and the provider issues the certificate.
    relation: dict[str, int] = {}

    async def add_certificates() -> None:
        def relate() -> None:
            relation["id"] = harness.add_relation(charm.CERTIFICATES_RELATION, PROVIDER)
            harness.add_relation_unit(relation["id"], f"{PROVIDER}/0")

        await deployment.hook(relate)
        await deployment.hook(lambda: provide_certificate(harness, relation["id"]))

    results["certificates relation added"] = await switch(deployment, add_certificates)

    # 3. The certificates relation is removed: back to the internal CA's certificate.
    async def remove_certificates() -> None:
        await deployment.hook(lambda: harness.remove_relation(relation["id"]))

    results["certificates relation removed"] = await switch(deployment, remove_certificates)

    for kind, tally in results.items():
        report(kind, tally)
    # THEN no switch refused a single admission, each was measured under load, the old and
    # new CA were published together at some point, and the controller never restarted
    for kind, tally in results.items():
        assert tally.refused == [], (kind, tally.refused[:3])
        assert tally.allowed >= 20, (kind, tally.allowed)
        assert max(tally.bundle_sizes) >= 2, (kind, tally.bundle_sizes)
    assert deployment.controller.restarts == 0
    assert deployment.controller.running


# --- COS: scrape /metrics and evaluate the alert rules with Prometheus ---------------------

README_METRICS = (
    "aitenant_reconcile_total",
    "aitenant_reconcile_duration_seconds",
    "aitenant_workqueue_depth",
    "aitenant_api_requests_total",
    "aitenant_webhook_handler_seconds",
    "aitenant_leader",
    "aitenant_tenants",
    "aitenant_tenants_outside_active_longest_seconds",
)


def write_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def promtool_check_rules(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, check=False
    )


@contextlib.asynccontextmanager
async def prometheus(config: dict[str, Any], workdir: Path) -> AsyncIterator[str]:
    """Debian's Prometheus on a loopback port, stopped when the block ends."""
    binary = shutil.which("prometheus")
    assert binary, "install Debian's prometheus package (scripts/dev test does)"
    write_file(workdir / "prometheus.yml", yaml.safe_dump(config))
    address = f"127.0.0.1:{free_port()}"
    with (workdir / "prometheus.log").open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            binary,
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address={address}",
            "--storage.tsdb.retention.time=1h",
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        yield f"http://{address}"
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def test_prometheus_scrapes_the_controller_and_evaluates_every_alert_rule(
    deployment: Deployment, tmp_path: Path
):
    # GIVEN the alert rules the charm publishes on metrics-endpoint, as a rule file
    topology = await deployment.charm.run(
        deployment.harness.charm._topology  # pyright: ignore[reportPrivateUsage]
    )
    rules = cos.load_alert_rules(topology)
    rule_file = tmp_path / "aitenant.rules.yaml"
    write_file(rule_file, yaml.safe_dump(rules))
    names = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    # WHEN promtool checks them
    checked = await asyncio.to_thread(promtool_check_rules, rule_file)
    print(f"\npromtool check rules: {checked.stdout.strip()}")
    # THEN they are valid
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(names)} rules found" in checked.stdout

    # GIVEN the controller's /metrics, which lists every metric the README names
    target = f"127.0.0.1:{deployment.controller.metrics_port}"
    async with httpx.AsyncClient(timeout=5) as http:
        scraped = (await http.get(f"http://{target}/metrics")).text
        for metric in README_METRICS:
            assert f"\n{metric}" in scraped, metric
        # WHEN Prometheus scrapes it as COS would (topology labels on the target) and
        # evaluates the rules every second
        labels = {**topology.labels(), "juju_unit": topology.unit}
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rule_file)],
            "scrape_configs": [
                {
                    "job_name": "aitenant",
                    "static_configs": [{"targets": [target], "labels": labels}],
                }
            ],
        }
        async with prometheus(config, tmp_path / "prometheus") as url:

            async def query(expr: str) -> list[dict[str, Any]]:
                answer = (await http.get(f"{url}/api/v1/query", params={"query": expr})).json()
                assert answer["status"] == "success", (expr, answer)
                return answer["data"]["result"]

            async def scraped_up() -> bool:
                return [r["value"][1] for r in await query('up{job="aitenant"}')] == ["1"]

            await eventually(scraped_up, timeout=60, interval=0.5)

            # (the controller has taken the leader Lease by then)
            async def leading() -> bool:
                return bool(await query(f"aitenant_leader{{{topology.matchers()}}} == 1"))

            await eventually(leading, timeout=60, interval=0.5)

            async def evaluated_quiet() -> dict[str, dict[str, Any]]:
                answer = (await http.get(f"{url}/api/v1/rules")).json()
                found = {
                    rule["name"]: rule
                    for group in answer["data"]["groups"]
                    for rule in group["rules"]
                    if rule.get("lastEvaluation", "").startswith("20")
                }
                states = {
                    n: (r["health"], r["state"], r.get("lastError")) for n, r in found.items()
                }
                assert set(found) == names, states
                assert all(state[:2] == ("ok", "inactive") for state in states.values()), states
                return found

            # THEN every rule evaluates without error, and none fires on a healthy controller
            evaluation = await eventually(evaluated_quiet, timeout=60, interval=0.5)
            for name, rule in evaluation.items():
                print(f"{name}: health={rule['health']} state={rule['state']}")
            # AND the series the rules need are there, under the deployment's labels
            phases = await query(f"aitenant_tenants{{{topology.matchers()}}}")
            assert {r["metric"]["phase"] for r in phases} >= {"Pending", "Active", "Failed"}
            for group in rules["groups"]:
                for rule in group["rules"]:
                    await query(rule["expr"])  # each expression runs on the scraped data


# --- Rights ----------------------------------------------------------------------------------


async def test_the_charm_grants_rights_only_where_the_controller_uses_them(
    deployment: Deployment, ca_cluster: LocalCluster
):
    kube = deployment.kube
    prefix = cluster_scoped_name(APP, MODEL)
    # GIVEN the deployed charm: its Roles in the AITenant and the gateway namespace
    for namespace, name in ((AITENANT_NS, f"{prefix}-claims"), ("gateways", f"{prefix}-gateway")):
        role = await kube.get(Role, name, namespace=namespace)
        assert role.metadata
        assert role.metadata.labels == CHARM_LABELS
    # AND its admission policy: the app's service account may not touch another binding
    probe = ClusterRoleBinding(
        metadata=ObjectMeta(name="rbac-probe"),
        roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name="view"),
        subjects=[Subject(kind="ServiceAccount", name="rbac-probe", namespace=MODEL)],
    )
    await kube.create(probe)
    app = AsyncClient(KubeConfig.from_file(ca_cluster.kubeconfig_for(APP_USER)))
    try:

        async def refused() -> bool:  # the API server loads policies through an informer
            try:
                await app.delete(ClusterRoleBinding, "rbac-probe", dry_run=True)
            except ApiError as exc:
                answer = (exc.status.code, exc.status.message or "")
            else:
                return False
            return answer[0] == 403 and prefix in answer[1]

        await eventually(refused, timeout=30, interval=0.2)
    finally:
        await app.close()
        await kube.delete(ClusterRoleBinding, "rbac-probe")
    # AND the charm creates a missing AITenant namespace as the controller would (labelled)
    sync = Client(KubeConfig.from_file(ca_cluster.kubeconfig), field_manager="tests")
    try:
        await asyncio.to_thread(api_server_writes.ensure_namespace, sync, "charm-made-tenants")
        await asyncio.to_thread(api_server_writes.ensure_namespace, sync, "charm-made-tenants")
    finally:
        lightkube_private.close(sync)
    made = await kube.get(Namespace, "charm-made-tenants")
    assert made.metadata
    assert made.metadata.labels
    assert made.metadata.labels.items() >= contract.MANAGED_NAMESPACE_LABELS.items()


# --- Teardown ------------------------------------------------------------------------------


async def test_prepare_removal_releases_finalizers_so_deletion_completes(
    deployment: Deployment,
):
    kube = deployment.kube
    # GIVEN two tenants the controller took in charge (our finalizer is on them)
    names = ["teardown-a", "teardown-b"]
    for name in names:
        await eventually(
            lambda name=name: samples.create_aitenant(kube, samples.aitenant(name, AITENANT_NS)),
            timeout=30,
        )

    async def finalized() -> bool:
        for name in names:
            obj = await kube.get(AITenant, name, namespace=AITENANT_NS)
            if obj.metadata is None or contract.AITENANT_FINALIZER not in (
                obj.metadata.finalizers or []
            ):
                return False
        return True

    await eventually(finalized, timeout=60)
    # WHEN the operator runs prepare-removal
    output: dict[str, Any] = {}

    def run() -> None:
        output.update(deployment.harness.run_action(charm.PREPARE_REMOVAL_ACTION).results)

    await deployment.hook(run)
    # THEN it reports what it released
    print(f"\nprepare-removal results: {output}")
    released = output["aitenants"].split()
    assert {f"{AITENANT_NS}/{name}" for name in names} <= set(released)
    assert int(output["released"]) >= len(names)
    # AND the controller process is stopped and the webhook configuration is gone
    assert not deployment.controller.running
    with pytest.raises(ApiError) as gone:
        await kube.get(ValidatingWebhookConfiguration, cluster_scoped_name(APP, MODEL))
    assert gone.value.status.code == 404
    # AND deleting a tenant now completes without any controller
    for name in names:
        await kube.delete(AITenant, name, namespace=AITENANT_NS)

    async def deleted() -> bool:
        remaining = [o async for o in kube.list(AITenant, namespace=AITENANT_NS)]
        return not [o for o in remaining if o.metadata and o.metadata.name in names]

    await eventually(deleted, timeout=30)
    # AND what the README says stays, stays: the CRDs and the tenants' namespace
    await kube.get(CustomResourceDefinition, "aitenants.maas.opendatahub.io")
    await kube.get(Namespace, AITENANT_NS)
