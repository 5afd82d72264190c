"""The tenant platform on a real API server and node (docs/differences.md D5, D6, D9;
docs/contract.md §3.6, §5.4): rendered and reported Ready, Ready only once maas-api is
available, disjoint between tenants, missing or foreign pieces reported, removed after a
forced deletion. Each maas-api Deployment's availability is the deployment controller's,
from what the kubelet reports (tests/e2e/test_platform_runs.py looks at the pods
themselves; edits and leftovers: test_platform_edits.py).
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from cryptography import x509
from devtools import samples
from devtools.cluster import LocalCluster
from devtools.maas_api import FakeMaasApi
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Namespace, Secret
from lightkube.types import PatchType

from aitenant import contract
from aitenant.platform import kinds
from aitenant.resources import AITenant, MaaSSubscription
from aitenant.runtime.control.controller import Key, RequeueAfter

from ..harness import (
    AITENANT_NS,
    CONTROLLER_USER,
    INFRA_NS,
    RunningController,
    e2e_settings,
    eventually,
)
from ..tenants import PHASE_TIMEOUT, Names, make_tenant, node_cordoned, ready, wait_phase
from .tenant_platform import (
    AITENANT_KIND,
    CONFIG,
    CONFIG_KIND,
    SCOPES,
    absent,
    config_with_reason,
    expected_platform,
    get,
    get_config,
    platform_of,
    reconcile_config,
)

pytestmark = pytest.mark.e2e


async def test_platform_is_rendered_and_the_config_reports_ready(
    kube: AsyncClient, controller: RunningController, maas_api: FakeMaasApi, unique: Names
) -> None:
    name = unique("platform")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")

    assert await platform_of(kube, name) == expected_platform(name)
    for kind, namespace, obj_name in expected_platform(name):
        k = next(k for k, _ in SCOPES if k.kind == kind)
        obj = await get(kube, k, obj_name, namespace or None)
        meta = obj["metadata"]
        labels = meta["labels"]
        assert labels["app.kubernetes.io/part-of"] == "models-as-a-service"
        assert labels["app.kubernetes.io/managed-by"] == "aitenant-controller"
        assert labels["maas.opendatahub.io/tenant-name"] == name
        assert labels["maas.opendatahub.io/tenant-namespace"] == tns
        # cross-namespace: labels only (docs/differences.md D6)
        assert not meta.get("ownerReferences")

    cronjob = await get(kube, kinds.CRONJOB, f"maas-api-key-cleanup-{name}", INFRA_NS)
    assert cronjob["apiVersion"] == "batch/v1"
    assert cronjob["spec"]["schedule"] == "*/15 * * * *"

    # Written by field manager aitenant-controller: created (an Update entry), owned as
    # applied from its first apply on (test_platform_edits's telemetry test removes a field).
    deployment = await get(kube, kinds.DEPLOYMENT, f"maas-api-{name}", INFRA_NS)
    managers = {m["manager"]: m["operation"] for m in deployment["metadata"]["managedFields"]}
    assert managers["aitenant-controller"] in ("Update", "Apply")
    route = await get(kube, kinds.HTTP_ROUTE, f"maas-api-route-{name}", INFRA_NS)
    assert route["spec"]["parentRefs"][0]["name"] == name

    # The serving certificate (docs/differences.md D9): signed by the CA the controller was
    # given, right names.
    secret = await get(kube, kinds.SECRET, f"maas-api-{name}-serving-cert", INFRA_NS)
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    ca = x509.load_pem_x509_certificate(maas_api.ca_file.read_bytes())
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        f"maas-api-{name}.{INFRA_NS}.svc",
        f"maas-api-{name}.{INFRA_NS}.svc.cluster.local",
    ]
    # The Gateway originates TLS to that Service, checking that name against that CA.
    policy = await get(kube, kinds.BACKEND_TLS_POLICY, f"maas-api-{name}", INFRA_NS)
    assert policy["spec"]["targetRefs"] == [
        {"group": "", "kind": "Service", "name": f"maas-api-{name}"}
    ]
    validation = policy["spec"]["validation"]
    assert validation["hostname"] in san.get_values_for_type(x509.DNSName)
    assert validation["caCertificateRefs"] == [
        {"group": "", "kind": "ConfigMap", "name": f"maas-api-{name}-backend-ca"}
    ]
    bundle = await get(kube, kinds.CONFIG_MAP, f"maas-api-{name}-backend-ca", INFRA_NS)
    assert bundle["data"] == {"ca.crt": maas_api.ca_file.read_text()}

    config = await get_config(kube, name)
    assert contract.TENANT_CONFIG_FINALIZER in config["metadata"]["finalizers"]
    status = config["status"]
    assert status["phase"] == "Active"
    assert status["infraNamespace"] == INFRA_NS
    cond = ready(config)
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "Reconciled",
        "MaaS platform manifests applied and maas-api deployment is available",
    )
    assert cond["observedGeneration"] == config["metadata"]["generation"]


async def test_config_is_ready_only_once_maas_api_is_available(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    name = unique("waiting")
    deployment = f"maas-api-{name}"
    async with node_cordoned(kube):  # the maas-api pod cannot be placed meanwhile
        await make_tenant(kube, name)

        config = await config_with_reason(kube, name, "MaaSAPINotAvailable")
        assert config["status"]["phase"] == "Pending"
        assert ready(config)["status"] == "False"
        waiting = f"waiting for Deployment {INFRA_NS}/{deployment} to become available"
        assert ready(config)["message"].startswith(waiting)

        async def says_unscheduled() -> bool:
            message = ready(await get_config(kube, name))["message"]
            return message.startswith(f"{waiting}: pod {deployment}-") and (
                "not scheduled (Unschedulable: " in message
            )

        await eventually(says_unscheduled, timeout=PHASE_TIMEOUT)
        await wait_phase(kube, name, "Pending", "TenantConfigNotReady")
        # A pass while the Deployment is unavailable keeps waiting (and looks again in 30 s).
        assert controller.app is not None
        key = Key(f"ai-tenant-{name}", CONFIG)
        assert await controller.app.config_controller.process(key) == RequeueAfter(30)
        assert (await get_config(kube, name))["status"]["phase"] == "Pending"
    loop = asyncio.get_running_loop()

    async def available() -> float | None:
        obj = await get(kube, kinds.DEPLOYMENT, deployment, INFRA_NS)
        return loop.time() if samples.is_available(obj) else None

    # The deployment controller reports it once the kubelet runs the pod and it is Ready.
    became_available = await eventually(available, timeout=PHASE_TIMEOUT, interval=0.05)
    await wait_phase(kube, name, "Active")
    # Noticed through the Deployment watch, not a periodic requeue (30 s).
    assert loop.time() - became_available < 5


async def test_two_tenants_are_disjoint_and_deletion_removes_only_its_own(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    first, second = unique("left"), unique("right")
    for name in (first, second):
        await make_tenant(kube, name)
    for name in (first, second):
        await wait_phase(kube, name, "Active")
    mine, theirs = await platform_of(kube, first), await platform_of(kube, second)
    assert mine == expected_platform(first)
    assert theirs == expected_platform(second)
    assert not mine & theirs

    await kube.delete(AITenant, first, namespace=AITENANT_NS)

    async def cleaned() -> bool:
        return await platform_of(kube, first) == set()

    await eventually(cleaned, timeout=20)
    assert await platform_of(kube, second) == theirs
    # The tenant namespace is released, never deleted.
    ns = await kube.get(Namespace, f"ai-tenant-{first}")
    assert ns.metadata is not None
    assert ns.metadata.deletionTimestamp is None


async def test_missing_db_secret_is_reported(
    kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """maas-api reads Secret maas-db-config (a name fixed in maas-api): without it the config
    says so and nothing is rendered; once it is there the tenant goes Active."""
    name = unique("nodb")
    await kube.delete(Secret, samples.DB_SECRET, namespace=INFRA_NS)
    try:
        await make_tenant(kube, name)

        config = await config_with_reason(kube, name, "DependencyMissing")
        assert ready(config)["message"] == (
            f"Secret {INFRA_NS}/maas-db-config not found: maas-api reads DB_CONNECTION_URL "
            "from it (--maas-api-db-secret)"
        )
        assert await platform_of(kube, name) == set()
    finally:
        await samples.ensure_db_secret(kube, INFRA_NS)
    await wait_phase(kube, name, "Active")


async def test_a_same_named_deployment_someone_else_made_is_reported_not_rewritten(
    cluster: LocalCluster, kube: AsyncClient, controller: RunningController, unique: Names
) -> None:
    """A maas-api Deployment another controller made (its own selector, none of our labels) is
    invisible to our label-selected caches. The create that finds its name taken is the only
    write; it is read, reported as in the way with who made it and the fix, and later passes
    only read it (docs/differences.md D32); deleting it lets the platform be applied and the
    tenant go Active."""
    name = unique("theirs")
    deployment = f"maas-api-{name}"
    selector = {"app": f"theirs-{name}"}
    theirs = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": deployment, "namespace": INFRA_NS},
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {"containers": [{"name": "maas-api", "image": "maas-api:theirs"}]},
            },
        },
    }
    await kube.patch(
        kinds.DEPLOYMENT.resource,
        deployment,
        theirs,
        namespace=INFRA_NS,
        patch_type=PatchType.APPLY,
        field_manager="maas-controller",
    )
    await make_tenant(kube, name)

    message = ready(await config_with_reason(kube, name, "ApplyFailed"))["message"]
    assert message == (
        f"Deployment {INFRA_NS}/{deployment} is in the way: it exists, made by maas-controller, "
        f"without {contract.LABEL_TENANT_NAME}={name}, and is not taken over; rename or delete "
        "it and the platform is applied"
    )
    for _ in range(3):  # passes as the 30 s requeue (or any event) would bring
        await reconcile_config(controller, name)

    def writes_of_it() -> list[int]:
        """The answers to the controller's writes of it, in order."""
        # A request refused at authentication (a deleted tenant's token) is audited with no user.
        return [
            event["responseStatus"]["code"]
            for line in cluster.audit_log.read_text().splitlines()
            if (event := json.loads(line)).get("user", {}).get("username") == CONTROLLER_USER.name
            and event["verb"] in ("patch", "update", "create")
            and event.get("objectRef", {}).get("name") == deployment
            and event["objectRef"].get("resource") == "deployments"
            and event.get("stage") == "ResponseComplete"
        ]

    assert writes_of_it() == [409], "one create that found the name taken, never a write over it"
    live = await get(kube, kinds.DEPLOYMENT, deployment, INFRA_NS)
    assert live["spec"]["selector"]["matchLabels"] == selector
    assert contract.LABEL_TENANT_NAME not in (live["metadata"].get("labels") or {})
    await kube.delete(kinds.DEPLOYMENT.resource, deployment, namespace=INFRA_NS)
    await reconcile_config(controller, name)  # its requeue, 30 s later
    await wait_phase(kube, name, "Active")
    live = await get(kube, kinds.DEPLOYMENT, deployment, INFRA_NS)
    assert live["metadata"]["labels"][contract.LABEL_TENANT_NAME] == name


async def test_a_forced_deletion_leaves_nothing_of_the_platform_serving(
    cluster: LocalCluster,
    kube: AsyncClient,
    controller: RunningController,
    maas_api: FakeMaasApi,
    unique: Names,
) -> None:
    """A MaaSSubscription whose foreign finalizer never clears holds the config's cleanup; once
    the deletion timeout has removed the AITenant, its platform goes all the same, so its
    Gateway cannot route to the old maas-api (docs/contract.md §5.4)."""
    name = unique("forced-platform")
    tns = f"ai-tenant-{name}"
    await make_tenant(kube, name)
    await wait_phase(kube, name, "Active")
    before = await platform_of(kube, name)
    assert {"Deployment", "Service", "HTTPRoute", "TokenRateLimitPolicy"} <= {
        kind for kind, _, _ in before
    }
    stuck = samples.maas_subscription("stuck", tns, finalizers=["example.com/never"])
    await kube.create(MaaSSubscription.from_dict(stuck))
    await controller.stop()  # one with a 2 s deletion timeout instead
    impatient = RunningController(cluster, e2e_settings(maas_api, deletion_timeout=2.0))
    await impatient.start()
    loop = asyncio.get_running_loop()
    try:
        await kube.delete(AITenant, name, namespace=AITENANT_NS)

        async def tenant_gone() -> bool:
            return await absent(kube, AITENANT_KIND, name, AITENANT_NS)

        await eventually(tenant_gone, timeout=30)
        gone_at = loop.time()

        async def nothing_left() -> bool:
            return not await platform_of(kube, name)

        try:
            await eventually(nothing_left, timeout=20, interval=0.2)
        except AssertionError:
            left = sorted(await platform_of(kube, name))
            raise AssertionError(f"left after the AITenant was gone: {left}") from None
        print(f"\nplatform gone {loop.time() - gone_at:.2f} s after the forced AITenant")
        assert await absent(kube, CONFIG_KIND, CONFIG, tns)
    finally:
        await impatient.stop()
        await kube.patch(
            MaaSSubscription,
            "stuck",
            {"metadata": {"finalizers": None}},
            namespace=tns,
            patch_type=PatchType.MERGE,
        )
        await controller.start()
