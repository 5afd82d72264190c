"""What the e2e fixtures (tests/e2e/conftest.py) set up, for tests that set up more of the
same: the namespaces and users of the suite, admin clients on a cluster made ready for the
controller with exactly the charm's rights, the webhook's serving certificate, the
controller's settings and a controller running in this test process; and ``eventually``,
the suite's polling helper."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import msgspec
import trustme
from devtools import images, samples
from devtools.cluster import ADMIN_TOKEN, LocalCluster, User
from devtools.maas_api import FakeMaasApi
from lightkube import AsyncClient, KubeConfig, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.admissionregistration_v1 import (
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
)
from lightkube.resources.rbac_authorization_v1 import (
    ClusterRoleBinding,
    Role,
    RoleBinding,
)

from aitenant import contract, manifests
from aitenant.app import App, build_app, connect
from aitenant.runtime.control.controller import Done, Key, Result
from aitenant.runtime.serving.metrics import Metrics
from aitenant.settings import Settings

AITENANT_NS = "ai-tenants"
# A static-token user named like the controller's service account (no token controller runs).
CONTROLLER_USER = User(
    "system:serviceaccount:aitenant-system:aitenant-controller",
    "aitenant-controller-token",
    ("system:serviceaccounts", "system:serviceaccounts:aitenant-system"),
)
# A user bound, test by test, only to a tenant's tenant-admin Role (test_tenant_isolation.py).
TENANT_ADMIN_USER = User("tenant-admin-probe", "tenant-admin-probe-token")
GATEWAY_NS = "gateways"
INFRA_NS = "aitenant-system"
SUBSCRIPTION_NS = "models-as-a-service"
# Verbs of aitenant_api_requests_total that write.
WRITE_VERBS = ("CREATE", "UPDATE", "PATCH", "DELETE")


async def eventually(
    check: Callable[[], Awaitable[Any]], *, timeout: float = 15.0, interval: float = 0.05
) -> Any:
    """Poll ``check`` until it returns a truthy value without raising; return that value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = await check()
            if value:
                return value
        except (AssertionError, LookupError) as exc:
            last = exc
        except Exception as exc:  # API errors while objects appear
            last = exc
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {last!r}")
        await asyncio.sleep(interval)


def client_for(cluster: LocalCluster) -> AsyncClient:
    return AsyncClient(KubeConfig.from_file(cluster.kubeconfig), field_manager="aitenant-tests")


def controller_kubeconfig(cluster: LocalCluster) -> Path:
    """The controller authenticates as its service account, bound only to our ClusterRoles and
    the Roles of its namespace and the infra namespace (``bind_controller_roles``)."""
    return cluster.kubeconfig_for(CONTROLLER_USER)


CONTROLLER_RBAC_PREFIX = "aitenant-controller"
# The controller's service account (in INFRA_NS) and its ClusterRoleBinding.
CONTROLLER_SA = "aitenant-controller"
CONTROLLER_BINDING = "aitenant-controller"


async def bind_controller_roles(
    client: AsyncClient, *, infra_namespace: str = INFRA_NS, aitenant_namespace: str = AITENANT_NS
) -> None:
    """Exactly the rights the charm grants: the shipped ClusterRoles, bound, and the Roles of
    the controller namespace (leader Lease), the infra namespace (tenant platform), the
    AITenant namespace (gateway claims) and the gateway namespace (Kuadrant policies), and the
    admission policy on the controller's ClusterRoleBinding writes."""
    await samples.apply_shipped_cluster_roles(client, "aitenant-tests")
    binding = ClusterRoleBinding(
        metadata=ObjectMeta(name=CONTROLLER_BINDING),
        roleRef=RoleRef(
            apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name="aitenant-controller"
        ),
        subjects=[Subject(kind="ServiceAccount", name=CONTROLLER_SA, namespace=INFRA_NS)],
    )
    await client.apply(binding, field_manager="aitenant-tests", force=True)
    for doc in manifests.render_binding_policy(
        name="aitenant-controller",
        service_account=CONTROLLER_SA,
        service_account_namespace=INFRA_NS,
        own_binding=CONTROLLER_BINDING,
    ):
        policy = codecs.from_dict(doc)
        assert isinstance(policy, ValidatingAdmissionPolicy | ValidatingAdmissionPolicyBinding)
        await client.apply(policy, field_manager="aitenant-tests", force=True)
    for doc in manifests.render_namespaced_rbac(
        prefix=CONTROLLER_RBAC_PREFIX,
        controller_namespace=INFRA_NS,
        infra_namespace=infra_namespace,
        aitenant_namespace=aitenant_namespace,
        gateway_namespace=GATEWAY_NS,
        service_account=CONTROLLER_SA,
        service_account_namespace=INFRA_NS,
    ):
        obj = Role.from_dict(doc) if doc["kind"] == "Role" else RoleBinding.from_dict(doc)
        await client.apply(
            cast(Role | RoleBinding, obj), field_manager="aitenant-tests", force=True
        )


async def prepared_client(cluster: LocalCluster) -> AsyncClient:
    """An admin client on a cluster made ready for the controller: the CRDs, its namespaces
    and database Secret, and exactly the rights the charm grants, enforced."""
    client = client_for(cluster)
    await samples.install_crds(client)
    for ns in (AITENANT_NS, GATEWAY_NS, INFRA_NS):
        await samples.ensure_namespace(client, ns)
    await samples.ensure_db_secret(client, INFRA_NS)
    await bind_controller_roles(client)
    await binding_policy_enforced(cluster)
    return client


async def binding_policy_enforced(cluster: LocalCluster, timeout: float = 30) -> None:
    """Wait until the API server enforces the admission policy (it loads policies through an
    informer). The probe impersonates the controller from the admin identity, so the audit
    checks of test_security.py, which look at the controller's own requests, never see it."""
    headers = {
        "Authorization": f"Bearer {ADMIN_TOKEN}",
        "Impersonate-User": CONTROLLER_USER.name,
    }
    body = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "binding-policy-ready"},  # unlabelled: must be refused
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": contract.MAAS_API_CLUSTER_ROLE,
        },
        "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": INFRA_NS}],
    }
    url = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings?dryRun=All"
    # verify=False: the local API server's certificate is self-signed (as in its kubeconfig).
    async with httpx.AsyncClient(base_url=cluster.server, verify=False, headers=headers) as http:

        async def refused() -> bool:
            return (await http.post(url, json=body)).status_code == 403

        await eventually(refused, timeout=timeout, interval=0.2)


@dataclass
class WebhookTLS:
    """The webhook's serving certificate, from an in-memory CA, as files the controller reads."""

    ca: trustme.CA
    cert_dir: Path
    port: int

    def write_cert(self, ca: trustme.CA | None = None) -> None:
        cert = (ca or self.ca).issue_cert("127.0.0.1")
        cert.private_key_pem.write_to_path(str(self.cert_dir / "tls.key.new"))
        (self.cert_dir / "tls.crt.new").write_bytes(
            b"".join(blob.bytes() for blob in cert.cert_chain_pems)
        )
        # Replace both files atomically, key first, the way a Secret volume update would.
        (self.cert_dir / "tls.key.new").replace(self.cert_dir / "tls.key")
        (self.cert_dir / "tls.crt.new").replace(self.cert_dir / "tls.crt")


def e2e_settings(
    maas_api: FakeMaasApi, webhook_tls: WebhookTLS | None = None, **overrides: Any
) -> Settings:
    values: dict[str, Any] = {
        "maas_api_url_template": maas_api.url_template,
        "maas_api_ca_file": maas_api.ca_file,
        "maas_api_ca_key_file": maas_api.ca_key_file,
        "enable_tenant_namespace_discovery": True,
        "aitenant_namespace": AITENANT_NS,
        "gateway_namespace": GATEWAY_NS,
        "gateway_name": "maas-default-gateway",
        "maas_subscription_namespace": SUBSCRIPTION_NS,
        "controller_namespace": INFRA_NS,
        "health_port": 0,
        "metrics_port": 0,
        "webhook_port": 0,
        "manage_default_tenant": False,
        "bind_address": "127.0.0.1",
        # Imported into the node's containerd (devtools/images.py); nothing is pulled.
        "maas_api_image": images.maas_api_image(),
        "maas_api_cleanup_image": images.CLEANUP_IMAGE,
    }
    if webhook_tls is not None:
        values["webhook_port"] = webhook_tls.port
        values["webhook_cert_dir"] = webhook_tls.cert_dir
    values.update(overrides)
    return Settings(**values)


class RunningController:
    """A controller (App) running in a background task; can be stopped and started again."""

    def __init__(
        self,
        cluster: LocalCluster,
        settings: Settings,
        prepare: Callable[[App], None] | None = None,
    ) -> None:
        self.cluster = cluster
        # The webhook's own client (app/servers.py) connects with the settings' kubeconfig: as
        # the controller, like the client given to the App.
        if settings.kubeconfig is None:
            settings = msgspec.structs.replace(settings, kubeconfig=controller_kubeconfig(cluster))
        self.settings = settings
        # Called with each App built, before it runs (e.g. to route its revocation calls).
        self.prepare = prepare
        self.metrics = Metrics()
        self.reconciled: list[Key] = []  # AITenant keys, as each reconcile starts
        self.results: list[tuple[Key, Result]] = []  # and each outcome, as it ends
        self.raised: list[tuple[Key, Exception]] = []  # or what it raised instead
        self.app: App | None = None
        self._task: asyncio.Task[None] | None = None
        self._client: AsyncClient | None = None

    async def start(self) -> App:
        # The field manager the controller process uses (app.make_client).
        self._client = connect(
            controller_kubeconfig(self.cluster), contract.CONTROLLER_NAME, self.metrics
        )
        app = build_app(self.settings, self._client, self.metrics)
        if self.prepare is not None:
            self.prepare(app)
        inner = app.aitenant_controller.reconcile

        async def recording(key: Key) -> Result:
            self.reconciled.append(key)
            try:
                result = await inner(key)
            except Exception as exc:
                self.raised.append((key, exc))
                raise
            self.results.append((key, result))
            return result

        app.aitenant_controller.reconcile = recording
        self.app = app
        self._task = asyncio.create_task(app.manager.run())
        await asyncio.wait_for(app.manager.wait_synced(), 30)
        return app

    def last_result(self, key: Key) -> Result | None:
        """The outcome of the last finished reconcile of ``key`` (None: none finished)."""
        return next((r for k, r in reversed(self.results) if k == key), None)

    def settled(self, key: Key) -> bool:
        """No reconcile of ``key`` is running and the last one scheduled nothing."""
        started = self.reconciled.count(key)
        finished = sum(1 for k, _ in self.results if k == key)
        return started == finished and isinstance(self.last_result(key), Done)

    def api_requests(self, verbs: tuple[str, ...] | None = None) -> float:
        """``aitenant_api_requests_total`` so far, only ``verbs`` when given."""
        total = 0.0
        for metric in self.metrics.api_requests.collect():
            for sample in metric.samples:
                if sample.name.endswith("_total") and (
                    verbs is None or sample.labels["verb"] in verbs
                ):
                    total += sample.value
        return total

    async def stop(self) -> None:
        if self.app is not None and self._task is not None:
            self.app.manager.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self._task, 15)
        if self._client is not None:
            await self._client.close()
        self.app, self._task, self._client = None, None, None
