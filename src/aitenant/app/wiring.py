"""``build_app``: one builder per concern, each given what it needs."""

from __future__ import annotations

from dataclasses import dataclass

from lightkube import AsyncClient

from aitenant.app.controllers import build_controllers
from aitenant.app.manager import build_manager
from aitenant.app.servers import build_servers
from aitenant.controllers.caches import build_caches
from aitenant.controllers.default_tenant.bootstrap import DefaultTenantBootstrap
from aitenant.runtime.cache.informer import Informer
from aitenant.runtime.control.controller import Controller
from aitenant.runtime.control.manager import Manager
from aitenant.runtime.serving.metrics import Metrics
from aitenant.settings import Settings


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


def build_app(settings: Settings, client: AsyncClient, metrics: Metrics) -> App:
    caches = build_caches(settings, client, metrics)
    controllers = build_controllers(settings, client, metrics, caches)
    manager = build_manager(settings, client, metrics, caches, controllers)
    manager.servers.extend(
        build_servers(settings, metrics, ready=manager.ready_problem, index=caches.by_gateway)
    )
    return App(
        settings,
        client,
        metrics,
        manager,
        caches.tenants,
        caches.configs,
        caches.gateways,
        controllers.aitenant,
        controllers.config,
        bootstrap=controllers.bootstrap,
    )
