"""Wiring: settings → client → informers, controllers, servers → one Manager.

The only module that knows every part; everything else takes its collaborators as arguments.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lightkube import AsyncClient, KubeConfig
from lightkube.config.client_adapter import verify_cluster
from lightkube.core.exceptions import ConfigError
from lightkube.resources.core_v1 import ConfigMap, Namespace, Secret
from lightkube.resources.rbac_authorization_v1 import Role

from aitenant import contract, kubernetes_version, naming
from aitenant.platform.cache import PlatformCache
from aitenant.platform.discovery import ApiDiscovery, http_fetch
from aitenant.reconcilers.aitenant import AITenantReconciler
from aitenant.reconcilers.bootstrap import DefaultTenantBootstrap
from aitenant.reconcilers.deletion import TenantFinalizer
from aitenant.reconcilers.infra_namespace import (
    NamespaceSetupError,
    ensure_managed_namespace,
    monitor_managed_namespace,
)
from aitenant.reconcilers.revocation import KeyRevoker
from aitenant.reconcilers.tenant_config import TenantConfigReconciler
from aitenant.reconcilers.watches import (
    CLAIM_OWNER_INDEX,
    CONFIG_OWNER_INDEX,
    GATEWAY_INDEX,
    annotated_owner,
    claim_owner_names,
    config_changed,
    gateway_index_key,
    in_scope,
    owner_index_key,
    platform_context_changed,
    settled,
    tenant_changed,
    tracked_config_key,
    wanted,
)
from aitenant.resources import AITenant, Config, Gateway, LegacyTenant, MaasTenantConfig
from aitenant.runtime.controller import Controller, Key
from aitenant.runtime.events import EventRecorder
from aitenant.runtime.informer import EventType, Handler, Informer, Obj
from aitenant.runtime.leader import LeaderElector
from aitenant.runtime.lightkube_private import http_client
from aitenant.runtime.manager import Manager
from aitenant.runtime.metrics import Metrics
from aitenant.runtime.reads import CachedReads
from aitenant.runtime.retry import RetryReads
from aitenant.runtime.server_thread import ServerThread
from aitenant.runtime.transport import AiohttpTransport, is_watch
from aitenant.settings import Settings, SettingsError, load_settings

if TYPE_CHECKING:
    from aiohttp import web

    from aitenant.runtime.http import ReadyCheck

log = logging.getLogger("aitenant")


def make_client(settings: Settings, metrics: Metrics) -> AsyncClient:
    return connect(settings.kubeconfig, contract.CONTROLLER_NAME, metrics)


def connect(kubeconfig: str | Path | None, field_manager: str, metrics: Metrics) -> AsyncClient:
    """A lightkube client for ``kubeconfig`` (None: in-cluster, or ``$KUBECONFIG``) whose
    requests go through aiohttp (``runtime.transport``), retry transient answers to reads
    (``runtime.retry``) and are counted by verb and code."""
    config = (KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()).get()
    if config is None or config.user is None:
        raise ConfigError("the kubeconfig has no current context with a user")
    tls = verify_cluster(config.cluster, config.user, config.abs_file)
    transport = RetryReads(AiohttpTransport(tls), on_retry=metrics.api_read_retries.inc)
    client = AsyncClient(config, field_manager=field_manager, transport=transport)
    count_requests(client, metrics)
    return client


def count_requests(client: AsyncClient, metrics: Metrics) -> None:
    """Count every API request by verb and code (lightkube exposes no hook, httpx does)."""

    async def on_response(response: Any) -> None:
        request = response.request
        verb = {
            "POST": "CREATE",
            "PUT": "UPDATE",
            "PATCH": "PATCH",
            "DELETE": "DELETE",
        }.get(request.method)
        if verb is None:
            verb = "WATCH" if is_watch(request) else "GET"
        metrics.api_requests.labels(verb, str(response.status_code)).inc()

    http_client(client).event_hooks["response"].append(on_response)


def namespace_view(obj: Obj) -> Obj:
    """What reconcilers read of a Namespace: its metadata and phase (the cache holds every
    namespace of the cluster, so nothing more)."""
    phase = (obj.get("status") or {}).get("phase")
    return {"metadata": obj["metadata"], "status": {"phase": phase} if phase else {}}


@dataclass
class App:
    settings: Settings
    client: AsyncClient
    metrics: Metrics
    manager: Manager
    tenants: Informer
    configs: Informer
    gateways: Informer
    aitenant_controller: Controller
    config_controller: Controller
    # The default-tenant bootstrap (leader only); None with --manage-default-tenant=false.
    bootstrap: DefaultTenantBootstrap | None = None

    def has_synced(self) -> bool:
        return self.tenants.synced.is_set()

    def tenants_for_gateway(self, namespace: str, name: str) -> list[tuple[str, str]]:
        return [
            (o["metadata"]["namespace"], o["metadata"]["name"])
            for o in self.tenants.by_index(GATEWAY_INDEX, gateway_index_key(namespace, name))
        ]


def build_app(settings: Settings, client: AsyncClient, metrics: Metrics) -> App:
    tenants = Informer(client, AITenant)
    metrics.track_phases(
        tenants.list,
        metric="aitenant_tenants",
        noun="AITenants",
        phases=(
            contract.PHASE_PENDING,
            contract.PHASE_ACTIVE,
            contract.PHASE_FAILED,
            contract.PHASE_TERMINATING,
        ),
        steady=contract.PHASE_ACTIVE,
    )
    tenants.add_index(
        GATEWAY_INDEX,
        lambda o: [gateway_index_key(*naming.gateway_ref_for(o, settings.gateway_namespace))],
    )
    configs = Informer(client, MaasTenantConfig)
    gateways = Informer(client, Gateway, namespace=settings.gateway_namespace)
    # Read caches for the tenant's children, so a pass over an unchanged tenant reads little
    # from the API (and a few faulty answers do not fail most passes).
    claims = Informer(
        client,
        ConfigMap,
        namespace=settings.aitenant_namespace,
        labels={contract.LABEL_GATEWAY_CLAIM: "true"},
    )
    claims.add_index(CLAIM_OWNER_INDEX, claim_owner_names)
    roles = Informer(client, Role, labels={contract.LABEL_MANAGED_BY_AITENANT: "true"})
    # Read caches whose misses are answers too, so a resync of settled tenants reads nothing
    # from the API: every namespace (metadata and phase only), the legacy Tenants (one name
    # per namespace; its CRD may be absent) and the maas-api DB Secret.
    namespaces = Informer(client, Namespace, namespace=None, transform=namespace_view)
    legacy_tenants = Informer(
        client, LegacyTenant, fields={"metadata.name": contract.LEGACY_TENANT_NAME}, optional=True
    )
    db_secret = Informer(
        client,
        Secret,
        namespace=settings.effective_infra_namespace,
        fields={"metadata.name": settings.maas_api_db_secret},
    )
    reads = CachedReads(client)
    for informer in (gateways, db_secret):
        reads.serve(informer)
    # Their callers create on None and read the object back on AlreadyExists, or (legacy
    # Tenants, as upstream's cached client) take a miss as "none": a miss may be trusted.
    for informer in (configs, claims, roles, namespaces, legacy_tenants):
        reads.serve(informer, trust_misses=True)

    platform_cache = PlatformCache(
        client,
        infra_namespace=settings.effective_infra_namespace,
        gateway_namespace=settings.gateway_namespace,
    )
    events = EventRecorder(client, component=contract.EVENT_SOURCE)
    finalizer = TenantFinalizer(
        client=client,
        settings=settings,
        events=events,
        revoker=KeyRevoker(ca_file=settings.maas_api_ca_file),
        reads=reads,
        platform=platform_cache,
    )
    reconciler = AITenantReconciler(
        client=client,
        settings=settings,
        events=events,
        get_tenant=tenants.get,
        remember=tenants.remember,
        reads=reads,
        finalize=finalizer,
    )
    # A controller waits for the caches its passes read that sync on any cluster; the Gateway's
    # and the platform's CRDs may be missing, and a pass reads those from the API until their
    # informers have synced.
    controller = Controller(
        "aitenant",
        reconciler.reconcile,
        metrics=metrics,
        workers=settings.workers,
        caches=[tenants, configs, claims, roles, namespaces, legacy_tenants],
    )
    config_reconciler = TenantConfigReconciler(
        client=client,
        settings=settings,
        get_config=configs.get,
        remember=configs.remember,
        get_tenant=tenants.get,
        reads=reads,
        discovery=ApiDiscovery(http_fetch(client)),
        cache=platform_cache,
    )
    config_controller = Controller(
        "maastenantconfig",
        config_reconciler.reconcile,
        metrics=metrics,
        workers=settings.workers,
        caches=[tenants, configs, db_secret, *platform_cache.built_in_informers],
    )

    def on_tenant(event: EventType, old: Obj | None, new: Obj) -> None:
        if tenant_changed(event, old, new):
            meta = new["metadata"]
            controller.enqueue(
                Key(meta["namespace"], meta["name"]), low_priority=settled(event, new)
            )

    def on_config(event: EventType, old: Obj | None, new: Obj) -> None:
        low = settled(event, new)
        meta = new["metadata"]
        # Only default-tenant is a tenant's config; another one copying its labels and
        # annotations concerns neither the AITenant nor the platform.
        if meta["name"] == contract.TENANT_CONFIG_NAME and (key := annotated_owner(new)):
            controller.enqueue(key, low_priority=low)
        if wanted(new, settings) and (event == "DELETED" or config_changed(old, new)):
            config_controller.enqueue(Key(meta["namespace"], meta["name"]), low_priority=low)

    def on_role(event: EventType, old: Obj | None, new: Obj) -> None:
        # A tenant-admin Role edited or deleted by someone else: restore it now.
        if event != "ADDED" and (key := annotated_owner(new)) is not None:
            controller.enqueue(key)

    def on_gateway(event: EventType, old: Obj | None, new: Obj) -> None:
        if (
            event == "MODIFIED"
            and old is not None
            and old["metadata"].get("generation") == new["metadata"].get("generation")
        ):
            return
        meta = new["metadata"]
        for namespace, name in app.tenants_for_gateway(meta["namespace"], meta["name"]):
            controller.enqueue(Key(namespace, name))

    tenants.add_handler(on_tenant)
    configs.add_handler(on_config)
    gateways.add_handler(on_gateway)
    roles.add_handler(on_role)

    elector = None
    if settings.leader_elect:
        elector = LeaderElector(
            client,
            name=contract.LEASE_NAME,
            namespace=settings.controller_namespace,
            lease_duration=settings.leader_elect_lease_duration,
            renew_deadline=settings.leader_elect_renew_deadline,
            retry_period=settings.leader_elect_retry_period,
        )
    manager = Manager(
        # Listed in this order at start (runtime/manager.py): what an AITenant pass reads
        # first, then the platform cache's (added below), so the first passes need not wait
        # for the platform's larger caches.
        informers=[
            tenants,
            configs,
            gateways,
            claims,
            roles,
            namespaces,
            legacy_tenants,
            db_secret,
        ],
        required_informers=[tenants, configs],
        controllers=[controller, config_controller],
        elector=elector,
        leader_runnables=[
            lambda: mark_leader(metrics),
            lambda: monitor_managed_namespace(
                client,
                settings.aitenant_namespace,
                settings.subscription_namespace_maintain_interval,
            ),
        ],
    )
    metrics.track_caches(lambda: manager.informers)
    app = App(
        settings,
        client,
        metrics,
        manager,
        tenants,
        configs,
        gateways,
        controller,
        config_controller,
    )
    add_tenant_platform(settings, app, platform_cache)
    if settings.manage_default_tenant:
        app.bootstrap = add_default_tenant_bootstrap(settings, client, app)
    checks: list[ReadyCheck] = [manager.ready_problem]

    async def start_health() -> web.AppRunner:
        http = await import_off_loop("aitenant.runtime.http")
        served = http.health_app(checks)
        return await http.serve(served, settings.bind_address, settings.health_port)

    async def start_metrics() -> web.AppRunner:
        http = await import_off_loop("aitenant.runtime.http")
        served = http.metrics_app(metrics)
        return await http.serve(served, settings.bind_address, settings.metrics_port)

    if settings.health_port:
        manager.servers.append(start_health)
    if settings.metrics_port:
        manager.servers.append(start_metrics)
    if settings.webhook_port and settings.webhook_cert_dir:
        manager.servers.append(lambda: start_webhook(settings, app))
    return app


def add_tenant_platform(settings: Settings, app: App, cache: PlatformCache) -> None:
    """Re-queue a tenant's MaasTenantConfig when what its platform is rendered from changes:
    the owning AITenant's status.gatewayRef, its Gateway appearing or going, and
    any of its platform objects (the Deployment turning Available, a user's edit, a deletion).
    The platform cache's informers run on every replica, like the others."""
    configs, controller = app.configs, app.config_controller
    configs.add_index(CONFIG_OWNER_INDEX, owner_index_key)

    def enqueue_owned_by(namespace: str, name: str) -> None:
        for config in configs.by_index(CONFIG_OWNER_INDEX, f"{namespace}/{name}"):
            if in_scope(config, settings):
                meta = config["metadata"]
                controller.enqueue(Key(meta["namespace"], meta["name"]))

    def on_tenant(event: EventType, old: Obj | None, new: Obj) -> None:
        if event == "DELETED" or platform_context_changed(old, new):
            enqueue_owned_by(new["metadata"]["namespace"], new["metadata"]["name"])

    def on_gateway(event: EventType, old: Obj | None, new: Obj) -> None:
        if event == "MODIFIED":
            return  # the platform needs the Gateway to exist, nothing more
        meta = new["metadata"]
        for namespace, name in app.tenants_for_gateway(meta["namespace"], meta["name"]):
            enqueue_owned_by(namespace, name)

    def on_platform_object(event: EventType, old: Obj | None, new: Obj) -> None:
        if (key := tracked_config_key(new)) is not None:
            controller.enqueue(key)

    app.tenants.add_handler(on_tenant)
    app.gateways.add_handler(on_gateway)
    cache.add_handler(on_platform_object)
    app.manager.informers.extend(cache.informers)


async def mark_leader(metrics: Metrics) -> None:
    """Runs only while this replica leads (or without leader election): the leader gauge."""
    metrics.is_leader.set(1)
    try:
        await asyncio.Event().wait()
    finally:
        metrics.is_leader.set(0)


def add_default_tenant_bootstrap(
    settings: Settings, client: AsyncClient, app: App
) -> DefaultTenantBootstrap:
    """The bootstrap loop (leader only), woken by events on the objects it decides on:
    Config/default, the default AITenant and its MaasTenantConfig."""
    bootstrap = DefaultTenantBootstrap(client=client, settings=settings)
    config_anchor = Informer(client, Config, namespace=None)

    def wake_on(namespace: str, name: str) -> Handler:
        def handler(event: EventType, old: Obj | None, new: Obj) -> None:
            meta = new["metadata"]
            if (meta.get("namespace") or "", meta["name"]) == (namespace, name):
                bootstrap.wake()

        return handler

    config_anchor.add_handler(wake_on("", contract.CONFIG_NAME))
    app.tenants.add_handler(wake_on(settings.aitenant_namespace, contract.DEFAULT_TENANT_NAME))
    app.configs.add_handler(
        wake_on(settings.maas_subscription_namespace, contract.TENANT_CONFIG_NAME)
    )
    # Not a readiness requirement: without the Config CRD the rest of the controller works.
    app.manager.informers.append(config_anchor)
    app.manager.leader_runnables.append(bootstrap.run)
    return bootstrap


async def import_off_loop(module: str) -> Any:
    """Import ``module`` in a worker thread: the HTTP servers' web framework takes a while to
    import, and the informers and the first reconciles go on meanwhile."""
    return await asyncio.to_thread(importlib.import_module, module)


async def start_webhook(settings: Settings, app: App) -> ServerThread:
    """The HTTPS admission webhook, on an event loop and thread of its own so that a review never
    waits behind a reconcile (docs/design.md §9.7). Its certificate is reloaded in place when the
    files change."""
    return await ServerThread.start("admission-webhook", lambda: serve_webhook(settings, app))


async def serve_webhook(settings: Settings, app: App) -> web.AppRunner:
    """Runs on the webhook's own loop: importing the web framework there holds up nothing."""
    assert settings.webhook_cert_dir is not None
    from aitenant.runtime.tls import CertReloader
    from aitenant.webhook import server as webhook_server
    from aitenant.webhook.validators import WebhookPolicy

    reloader = CertReloader(settings.webhook_cert_dir)
    policy = WebhookPolicy(
        aitenant_namespace=settings.aitenant_namespace,
        gateway_namespace=settings.gateway_namespace,
    )
    webhook = webhook_server.admission_app(
        policy=policy, index=app, observe=app.metrics.webhook_seconds.observe
    )

    async def stop_reloader(_: web.Application) -> None:
        await reloader.stop()

    webhook.on_cleanup.append(stop_reloader)
    await reloader.start()
    return await webhook_server.serve(
        webhook, host=settings.bind_address, port=settings.webhook_port, reloader=reloader
    )


class UnsupportedServer(Exception):
    """The API server is older than the oldest Kubernetes we support."""


async def check_server_version(client: AsyncClient) -> None:
    """Refuse to start against an API server we do not support (README, "Supported
    Kubernetes"): one line naming the version found and the version needed."""
    info = await http_fetch(client)("/version")
    try:
        problem = kubernetes_version.unsupported_reason(info or {})
    except ValueError as exc:
        raise UnsupportedServer(str(exc)) from None
    if problem is not None:
        raise UnsupportedServer(problem)


async def run(settings: Settings) -> int:
    metrics = Metrics()
    client = make_client(settings, metrics)
    try:
        await check_server_version(client)
        await ensure_managed_namespace(client, settings.aitenant_namespace)
    except (UnsupportedServer, NamespaceSetupError) as exc:
        log.error("%s", exc)
        await client.close()
        return 1
    app = build_app(settings, client, metrics)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, app.manager.stop)
    log.info(
        "starting: aitenant namespace %s, gateway namespace %s, infra namespace %s",
        settings.aitenant_namespace,
        settings.gateway_namespace,
        settings.effective_infra_namespace,
    )
    failures: list[BaseException] = []
    try:
        await app.manager.run()
    except* Exception as group:
        failures.extend(group.exceptions)
    finally:
        await client.close()
    for exc in failures:
        log.error("stopping: %s", exc)
    log.info("stopped")
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> None:
    import os

    try:
        settings = load_settings(sys.argv[1:] if argv is None else argv, os.environ)
    except SettingsError as exc:
        print(f"aitenant-controller: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # httpx logs every request at info: thousands of lines per minute under load. Only at debug.
    if logging.getLogger().level > logging.DEBUG:
        logging.getLogger("httpx2").setLevel(logging.WARNING)
    # The webhook's thread waits for the interpreter lock at each step of a review; 1 ms
    # instead of 5 lets it in sooner while reconciles run (docs/design.md §9.7).
    sys.setswitchinterval(0.001)
    raise SystemExit(asyncio.run(run(settings)))
