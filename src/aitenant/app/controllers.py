"""Both controllers and the default-tenant bootstrap (a leader-only loop, not a controller),
each from its own ``setup`` (``controllers/<name>/setup.py``: what it waits for, what wakes
it)."""

from __future__ import annotations

from dataclasses import dataclass

from lightkube import AsyncClient

from aitenant.controllers.aitenant import setup as setup_aitenant
from aitenant.controllers.caches import Caches
from aitenant.controllers.default_tenant import setup as setup_default_tenant
from aitenant.controllers.default_tenant.bootstrap import DefaultTenantBootstrap
from aitenant.controllers.tenant_config import setup as setup_tenant_config
from aitenant.runtime.control.controller import Controller
from aitenant.runtime.serving.metrics import Metrics
from aitenant.settings import Settings


@dataclass(frozen=True)
class Controllers:
    aitenant: Controller
    config: Controller
    # The default-tenant bootstrap (leader only); None with --manage-default-tenant=false.
    bootstrap: DefaultTenantBootstrap | None


def build_controllers(
    settings: Settings, client: AsyncClient, metrics: Metrics, caches: Caches
) -> Controllers:
    """Each setup adds its handlers to the caches, before they start."""
    return Controllers(
        aitenant=setup_aitenant(settings, client, metrics, caches),
        config=setup_tenant_config(settings, client, metrics, caches),
        bootstrap=(
            setup_default_tenant(settings, client, caches)
            if settings.manage_default_tenant
            else None
        ),
    )
