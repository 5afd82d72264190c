"""The charm under a real Juju, as a user runs it: deploy, integrate, configure, scale, trust,
remove (README "Integration tests" says how to run it).

Jubilant drives the `juju` CLI (python-libjuju, pytest-operator's client, does not speak to
Juju 4 controllers); lightkube reads the cluster ``$KUBECONFIG`` points at. The tests share
one model (``jubilant.temp_model``), run in file order and build on each other.

Without a controller (no ``juju`` binary, or ``juju show-controller`` fails) the module skips
itself and the run passes (conftest.py); with one but without ``AITENANT_CONTROLLER_IMAGE``
the run fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import jubilant
import pytest
from devtools import images, postgres
from devtools.node import NODE_IP
from lightkube import Client
from lightkube.resources.admissionregistration_v1 import (
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
)
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.networking_v1 import NetworkPolicy
from lightkube.resources.rbac_authorization_v1 import (
    ClusterRole,
    ClusterRoleBinding,
    Role,
    RoleBinding,
)
from tests.integration import cluster, support

from aitenant import contract, manifests
from aitenant.resources import AITenant, MaasTenantConfig
from aitenant_charm import cluster_manifests

ROOT = Path(__file__).resolve().parents[2]


def _why_no_juju() -> str | None:
    """Why no Juju controller can be used here, or None when one answers."""
    if shutil.which("juju") is None:
        return "the juju binary is not installed"
    try:
        result = subprocess.run(
            ["juju", "show-controller"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`juju show-controller` did not run: {exc}"
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        return f"no Juju controller reachable ({detail[-1] if detail else 'no output'})"
    return None


_NO_JUJU = _why_no_juju()
if _NO_JUJU:  # the one skip after which the run passes (see conftest.py)
    pytest.skip(f"no Juju controller: {_NO_JUJU}", allow_module_level=True)

IMAGE = os.environ.get("AITENANT_CONTROLLER_IMAGE", "")
if not IMAGE:
    pytest.fail(
        "a Juju controller answers but AITENANT_CONTROLLER_IMAGE is not set: name the "
        "controller image the cluster's nodes can run (README, Integration tests)",
        pytrace=False,
    )

APP = "aitenant-k8s"
TESTER = "maas-api-tester"
UNTRUSTED = "aitenant-untrusted"
CONTAINER = "aitenant-controller"  # metadata.yaml's workload container
# The maas-api image the cluster's nodes run, and its database URL: by default what the
# devtools node holds (the stand-in, or the real maas-api it was given) and serves.
MAAS_API_REF = os.environ.get("AITENANT_MAAS_API_REF") or images.maas_api_image()
MAAS_DB_URL = os.environ.get("AITENANT_MAAS_DB_URL") or postgres.database_url(NODE_IP)
# Another valid reference the tester publishes for a moment (never run: no tenant then).
PROBE_REF = "registry.invalid/maas-api:relation-probe"
DEPLOY_TIMEOUT = 15 * 60
TENANT_ACTIVE_TIMEOUT = 5 * 60
# Juju's model webhook deletes what an application's account created a while after its
# remove hook (some 30 s, seen with Juju 4.0): the kept objects are watched this long.
AFTER_REMOVAL_WATCH = 90
KEEP = support.env_flag(os.environ.get("AITENANT_KEEP_MODEL"))

# --- Fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def juju(request: pytest.FixtureRequest) -> Iterator[jubilant.Juju]:
    config = support.model_config(os.environ.get("AITENANT_MODEL_CONFIG"))
    with jubilant.temp_model(keep=KEEP, config=config or None) as juju:
        juju.wait_timeout = DEPLOY_TIMEOUT
        yield juju
        if request.session.testsfailed:
            try:
                print(juju.debug_log(limit=400), end="")
            except jubilant.CLIError as exc:  # the failure itself is what the report shows
                print(f"juju debug-log failed: {exc.stderr}")


@pytest.fixture(scope="module")
def names(juju: jubilant.Juju) -> support.RunNames:
    assert juju.model is not None
    return support.RunNames(juju.model)


@pytest.fixture(scope="module")
def kube() -> Iterator[Client]:
    client = Client(field_manager=cluster.FIELD_MANAGER)
    yield client
    client.close()


@pytest.fixture(scope="module")
def charms(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The packed charm and the tester: ``CHARM_PATH`` and ``TESTER_CHARM_PATH``, else packed
    here by scripts/pack-charm."""
    given = os.environ.get("CHARM_PATH"), os.environ.get("TESTER_CHARM_PATH")
    if all(given):
        return Path(given[0] or "").resolve(), Path(given[1] or "").resolve()
    out = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp(), prefix="charms-"))
    subprocess.run([str(ROOT / "scripts" / "pack-charm"), str(out)], check=True, timeout=1800)
    charm = Path(given[0]).resolve() if given[0] else support.packed_charm(out, APP)
    tester = Path(given[1]).resolve() if given[1] else support.packed_charm(out, TESTER)
    return charm, tester


@pytest.fixture(scope="module")
def platform(kube: Client, names: support.RunNames) -> Iterator[None]:
    """The platform administrator's part (Gateways, namespaces, the database Secret); at the
    end the run's AITenant, tenant namespace and namespaces go, unless the model is kept."""
    cluster.ensure_platform_crds(kube)
    # The AITenant namespace is the charm's to create (src/aitenant_charm/api_server_writes.py).
    for namespace in (names.gateway_namespace, names.infra_namespace):
        cluster.ensure_namespace(kube, namespace)
    cluster.ensure_gateway(kube, names.default_gateway, names.gateway_namespace)
    cluster.ensure_gateway(kube, names.tenant, names.gateway_namespace)
    cluster.ensure_db_secret(kube, names.infra_namespace, MAAS_DB_URL)
    yield
    if KEEP:
        return
    cluster.remove_tenant(kube, names.tenant, names.aitenant_namespace)
    cluster.remove_bindings_into(kube, [names.infra_namespace])
    cluster.remove_namespaces(
        kube,
        [
            f"{contract.TENANT_NAMESPACE_PREFIX}{names.tenant}",
            names.gateway_namespace,
            names.aitenant_namespace,
            names.infra_namespace,
        ],
    )


# --- Helpers ----------------------------------------------------------------------------


def first_config(names: support.RunNames) -> dict[str, jubilant.ConfigValue]:
    """The gateway from config (no `gateway` relation), the run's own AITenant namespace (the
    charm creates it when missing; the default one is cluster-wide), no default tenant (its
    namespace is cluster-wide too), and discovery off until test 3 turns it on."""
    return {
        "aitenant-namespace": names.aitenant_namespace,
        "gateway-namespace": names.gateway_namespace,
        "gateway-name": names.default_gateway,
        "manage-default-tenant": False,
        "enable-tenant-namespace-discovery": False,
    }


def messages(status: jubilant.Status, app: str) -> set[str]:
    return {unit.workload_status.message for unit in status.apps[app].units.values()}


def settled(status: jubilant.Status, *apps: str) -> bool:
    return jubilant.all_active(status, *apps) and jubilant.all_agents_idle(status, *apps)


def leader_unit(juju: jubilant.Juju, app: str) -> str:
    units = juju.status().apps[app].units
    return next(name for name, unit in units.items() if unit.leader)


def plan_flags(juju: jubilant.Juju, unit: str) -> dict[str, str]:
    """The controller's flags in the workload's Pebble plan, read from the charm container
    through the workload's Pebble socket (as ops reads it)."""
    socket = f"/charm/containers/{CONTAINER}/pebble.socket"
    task = juju.exec(f"PEBBLE_SOCKET={socket} /charm/bin/pebble plan", unit=unit)
    return support.controller_flags(task.stdout)


def controller_state(juju: jubilant.Juju, unit: str) -> support.ServiceState:
    socket = f"/charm/containers/{CONTAINER}/pebble.socket"
    command = f"PEBBLE_SOCKET={socket} /charm/bin/pebble services --abs-time"
    return support.service_state(juju.exec(command, unit=unit).stdout)


def deployment_names(kube: Client, namespace: str) -> set[str]:
    return {d.metadata.name or "" for d in kube.list(Deployment, namespace=namespace) if d.metadata}


def flags_become(juju: jubilant.Juju, unit: str, wanted: dict[str, str]) -> dict[str, str]:
    def read() -> dict[str, str] | None:
        flags = plan_flags(juju, unit)
        return flags if all(flags.get(k) == v for k, v in wanted.items()) else None

    return cluster.eventually(read, timeout=5 * 60, what=f"{wanted} in {unit}'s plan", every=5)


# --- Tests ------------------------------------------------------------------------------


def test_deploy_trusted_waits_for_maas_api(
    juju: jubilant.Juju, charms: tuple[Path, Path], names: support.RunNames, platform: None
):
    # GIVEN the packed charms and a cluster with the run's Gateways
    charm, tester = charms
    # WHEN the charm is deployed with --trust and the image, and the tester beside it
    juju.deploy(
        charm, APP, resources={"controller-image": IMAGE}, trust=True, config=first_config(names)
    )
    juju.deploy(tester, TESTER, config={"image": MAAS_API_REF})
    # THEN it settles, blocked on the one thing missing: the maas-api relation
    wanted = "missing relation: integrate `maas-api`"
    status = juju.wait(
        lambda s: messages(s, APP) == {wanted} and jubilant.all_agents_idle(s, APP),
        error=lambda s: jubilant.any_error(s, APP, TESTER),
    )
    assert jubilant.all_blocked(status, APP)


def test_maas_api_relation_reaches_the_controller(juju: jubilant.Juju, names: support.RunNames):
    # WHEN the tester is integrated over maas-api
    juju.integrate(f"{APP}:maas-api", f"{TESTER}:maas-api")
    # THEN both go active/idle
    juju.wait(lambda s: settled(s, APP, TESTER), error=lambda s: jubilant.any_error(s, APP))
    # AND the controller runs with what the relation and config said
    flags = plan_flags(juju, leader_unit(juju, APP))
    assert flags["maas-api-image"] == MAAS_API_REF
    assert flags["infra-namespace"] == names.model  # the tester publishes its model
    assert flags["maas-api-db-secret"] == contract.MAAS_API_DB_SECRET
    assert "maas-api-url-template" not in flags  # port 8443 is the controller's default
    assert flags["gateway-namespace"] == names.gateway_namespace
    assert flags["gateway-name"] == names.default_gateway
    assert flags["aitenant-namespace"] == names.aitenant_namespace
    assert flags["enable-tenant-namespace-discovery"] == "false"
    # AND a change on the provider's side reaches the plan, and back
    juju.config(TESTER, {"image": PROBE_REF})
    flags_become(juju, leader_unit(juju, APP), {"maas-api-image": PROBE_REF})
    juju.config(TESTER, {"image": MAAS_API_REF})
    flags_become(juju, leader_unit(juju, APP), {"maas-api-image": MAAS_API_REF})
    juju.wait(lambda s: settled(s, APP, TESTER))


def test_config_moves_the_namespaces_and_a_tenant_goes_active(
    juju: jubilant.Juju, kube: Client, names: support.RunNames
):
    # GIVEN the controller running since some time
    leader = leader_unit(juju, APP)
    before = controller_state(juju, leader)
    assert before.current == "active"
    # WHEN the infra namespace (over the relation's) and discovery are configured
    juju.config(
        APP, {"infra-namespace": names.infra_namespace, "enable-tenant-namespace-discovery": True}
    )
    # THEN the controller is replanned with them, and restarted
    flags_become(
        juju,
        leader,
        {"infra-namespace": names.infra_namespace, "enable-tenant-namespace-discovery": "true"},
    )
    juju.wait(lambda s: settled(s, APP))
    after = controller_state(juju, leader)
    assert after.current == "active"
    assert after.since != before.since, "the controller was not restarted"
    # AND an AITenant goes Active, which the controller started before could not do (with
    # discovery off it serves no tenant's MaasTenantConfig but the default tenant's)
    kube.create(cluster.aitenant(names.tenant, names.aitenant_namespace, names.tenant))
    try:
        cluster.eventually(
            lambda: cluster.phase(kube, names.tenant, names.aitenant_namespace) == "Active" or None,
            timeout=TENANT_ACTIVE_TIMEOUT,
            what=f"AITenant {names.tenant} Active",
        )
    except TimeoutError as exc:
        last = cluster.tenant_status(kube, names.tenant, names.aitenant_namespace)
        raise AssertionError(f"{exc}; its status: {last}") from None
    # AND its platform runs in the new infra namespace, the restarted controller's
    platform = deployment_names(kube, names.infra_namespace)
    assert platform, f"no Deployment in {names.infra_namespace}"


def test_two_units_one_leader_both_serve_the_webhook(
    juju: jubilant.Juju, kube: Client, names: support.RunNames
):
    # WHEN the application is scaled to two units
    juju.cli("scale-application", APP, "2")
    status = juju.wait(lambda s: len(s.apps[APP].units) == 2 and settled(s, APP))
    # THEN one is the leader, counting the cluster's tenants; the other stands by
    units = status.apps[APP].units
    leaders = [name for name, unit in units.items() if unit.leader]
    assert len(leaders) == 1
    count = cluster.count_aitenants(kube)
    counted = f"{count} tenant{'' if count == 1 else 's'}"
    assert messages(status, APP) == {counted, "standby (leader election is the controller's)"}
    # AND each unit's controller answers an admission review itself
    misplaced = cluster.aitenant(f"{names.tenant}-misplaced", names.model, names.tenant)
    refusal = (
        f"must be created in the configured AITenant infrastructure namespace "
        f'"{names.aitenant_namespace}"'
    )
    probe = support.webhook_probe_command(
        support.admission_review(misplaced.to_dict()),
        port=contract.DEFAULT_WEBHOOK_PORT,
        path=contract.WEBHOOK_PATH,
    )
    for unit in units:
        answer = juju.exec(probe, unit=unit).stdout
        assert refusal in support.refusal_message(answer), unit
    # AND through the API server the webhook refuses it with that message, every time
    for _ in range(6):
        assert refusal in cluster.admission_refusal(kube, misplaced)


def test_untrusted_deployment_blocks_with_the_trust_command(
    juju: jubilant.Juju, charms: tuple[Path, Path], names: support.RunNames
):
    # GIVEN the same config as the deployment already running (else its tenants are misplaced)
    config = {**juju.config(APP)}
    # WHEN a second deployment comes without --trust
    juju.deploy(charms[0], UNTRUSTED, resources={"controller-image": IMAGE}, config=config)
    # THEN it is blocked with the command to run
    wanted = f"run `juju trust {UNTRUSTED} --scope=cluster`"
    status = juju.wait(lambda s: UNTRUSTED in s.apps and messages(s, UNTRUSTED) == {wanted})
    assert jubilant.all_blocked(status, UNTRUSTED)
    # AND running it moves it on, to the next rung: one deployment per cluster
    juju.trust(UNTRUSTED, scope="cluster")
    other = f"model {names.model!r} already runs this charm on the cluster"
    juju.wait(lambda s: all(m.startswith(other) for m in messages(s, UNTRUSTED)))
    juju.remove_application(UNTRUSTED)
    juju.wait(lambda s: UNTRUSTED not in s.apps)
    # AND the first deployment never noticed
    juju.wait(lambda s: settled(s, APP))


def test_remove_application_keeps_crds_and_tenants(
    juju: jubilant.Juju, kube: Client, names: support.RunNames
):
    # GIVEN one unit, prepared for removal (README, "Removing the charm")
    juju.cli("scale-application", APP, "1")
    juju.wait(lambda s: len(s.apps[APP].units) == 1 and settled(s, APP))
    tenant_ns = f"{contract.TENANT_NAMESPACE_PREFIX}{names.tenant}"
    task = juju.run(f"{APP}/leader", "prepare-removal")
    assert f"{names.aitenant_namespace}/{names.tenant}" in task.results["aitenants"].split()
    assert f"{tenant_ns}/default-tenant" in task.results["maastenantconfigs"].split()
    platform = deployment_names(kube, names.infra_namespace)
    # WHEN the application is removed
    juju.remove_application(APP)
    juju.wait(lambda s: APP not in s.apps)
    # THEN the deployment's own objects are gone (src/aitenant_charm/removal.py)
    name = cluster_manifests.cluster_scoped_name(APP, names.model)
    for kind in (
        ValidatingWebhookConfiguration,
        ClusterRoleBinding,
        ValidatingAdmissionPolicyBinding,
        ValidatingAdmissionPolicy,
    ):
        assert not cluster.exists(kube, kind, name), f"{kind.__name__} {name} kept"
    policy = cluster_manifests.webhook_network_policy_name(APP)
    assert not cluster.exists(kube, NetworkPolicy, policy, names.model)
    prefix = cluster_manifests.namespaced_rbac_prefix(APP, names.model) + "-"
    for kind in (Role, RoleBinding):
        left = [
            o.metadata.name
            for o in kube.list(kind, namespace="*")
            if o.metadata and (o.metadata.name or "").startswith(prefix)
        ]
        assert not left, f"{kind.__name__}s kept: {left}"
    # AND what holds users' data stays, also once Juju has cleaned up after the application
    crds = [doc["metadata"]["name"] for doc in manifests.crd_documents()]
    roles = [doc["metadata"]["name"] for doc in manifests.cluster_role_documents()]
    deadline = time.monotonic() + AFTER_REMOVAL_WATCH
    while True:
        for crd in crds:
            assert cluster.exists(kube, CustomResourceDefinition, crd), f"CRD {crd} deleted"
        for role in roles:
            assert cluster.exists(kube, ClusterRole, role), f"ClusterRole {role} deleted"
        assert cluster.exists(kube, AITenant, names.tenant, names.aitenant_namespace)
        assert cluster.exists(kube, MaasTenantConfig, "default-tenant", tenant_ns)
        assert cluster.exists(kube, Namespace, tenant_ns)
        kept = deployment_names(kube, names.infra_namespace)
        assert platform <= kept, f"platform Deployments deleted: {platform - kept}"
        if time.monotonic() > deadline:
            break
        time.sleep(10)
    assert cluster.phase(kube, names.tenant, names.aitenant_namespace) == "Active"
