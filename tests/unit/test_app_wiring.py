"""How build_app wires the runtime: which caches each controller waits for, in which order
the informers list."""

from __future__ import annotations

from aitenant.app import build_app
from aitenant.runtime.serving.metrics import Metrics
from aitenant.settings import Settings

from .scripted_api import ScriptedApi

# Kinds whose CRDs a cluster may lack (Gateway API, Kuadrant): an informer on one of them never
# syncs there, so no controller may wait for it; its reads go to the API until it has synced.
MAY_BE_MISSING = {"Gateway", "HTTPRoute", "AuthPolicy", "TokenRateLimitPolicy", "TelemetryPolicy"}


def test_no_controller_waits_for_a_kind_that_may_not_be_served() -> None:
    app = build_app(Settings(), ScriptedApi().client(), Metrics())
    waited = {c.name: list(c.caches) for c in app.manager.controllers}
    assert set(waited) == {"aitenant", "maastenantconfig"}
    for caches in waited.values():
        kinds = {i.kind for i in caches}
        assert {"AITenant", "MaasTenantConfig"} <= kinds
        assert not kinds & MAY_BE_MISSING
        # The legacy Tenant CRD may be absent too: its informer syncs empty on a 404.
        assert all(i.optional for i in caches if i.kind == "Tenant")
    assert "Tenant" in {i.kind for i in waited["aitenant"]}


def test_what_an_aitenant_pass_reads_is_listed_first() -> None:
    app = build_app(Settings(), ScriptedApi().client(), Metrics())
    tenant_side = {i.kind for i in app.aitenant_controller.caches}
    listed = [i.kind for i in app.manager.informers]
    first = listed[: len(tenant_side) + 2]  # the Gateway and the DB Secret among them
    assert tenant_side <= set(first)
    assert "Deployment" not in first
