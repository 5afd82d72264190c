"""The deployed charm's monitoring, rights and removal, on a real API server.

- Debian's Prometheus scrapes the controller's /metrics (on loopback, for a bounded time) and
  evaluates every alert rule the charm ships; promtool checks the rule file.
- The charm grants Roles only where the controller uses them, its admission policy keeps the
  app's service account off other ClusterRoleBindings, and it creates a missing AITenant
  namespace labelled as the controller would.
- The prepare-removal action stops the controller and releases the finalizers, after which
  deleting a tenant completes at once (it runs last: it stops this module's controller).

The deployment is charm_deployment.py's, made by conftest.py's fixture.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from devtools import samples
from devtools.cluster import LocalCluster, free_port
from lightkube import ApiError, AsyncClient, Client, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding, Role

import charm
from aitenant import contract
from aitenant.resources import AITenant
from aitenant_charm import api_server_writes, cos, lightkube_private
from aitenant_charm.cluster_manifests import CHARM_LABELS, cluster_scoped_name

from ..harness import eventually
from .charm_deployment import AITENANT_NS, APP_USER, MODEL, Deployment
from .charm_harness import APP

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
