"""The tenants-by-phase gauges (zero-initialised, the longest time outside Active) and the
informer cache sizes."""

from __future__ import annotations

import datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Namespace
from prometheus_client.parser import text_string_to_metric_families

from aitenant.resources import AITenant
from aitenant.runtime.cache.informer import Informer
from aitenant.runtime.serving.metrics import Metrics, PhaseCollector, left_steady_at

from ...scripted_api import CONFIG

NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
PHASES = ("Pending", "Active", "Failed", "Terminating")


def tenant(
    phase: str | None, ready_since: str | None = None, created: str = "2026-01-01T11:00:00Z"
):
    obj: dict[str, Any] = {"metadata": {"name": "t", "creationTimestamp": created}}
    if phase is not None:
        conditions = []
        if ready_since is not None:
            conditions.append({"type": "Ready", "lastTransitionTime": ready_since})
        obj["status"] = {"phase": phase, "conditions": conditions}
    return obj


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


METRIC = "aitenant_tenants"


def test_every_phase_is_exported_at_zero_before_any_tenant():
    metrics = Metrics()
    metrics.track_phases(list, metric=METRIC, noun="AITenants", phases=PHASES, steady="Active")
    values = samples(metrics)
    for phase in PHASES:
        assert values[("aitenant_tenants", (("phase", phase),))] == 0
    assert values[("aitenant_tenants_outside_active_longest_seconds", ())] == 0


def test_counts_by_phase_and_longest_time_outside_active():
    objects = [
        tenant("Active", "2026-01-01T10:00:00Z"),
        tenant("Failed", "2026-01-01T11:30:00Z"),  # 30 min outside Active
        tenant("Pending", "2026-01-01T11:50:00Z"),
        tenant(None, created="2026-01-01T11:55:00Z"),  # never reconciled: from creation
    ]
    collector = PhaseCollector(
        lambda: objects, PHASES, "Active", metric=METRIC, noun="AITenants", now=lambda: NOW
    )
    families = {f.name: f for f in collector.collect()}
    by_phase = {s.labels["phase"]: s.value for s in families["aitenant_tenants"].samples}
    assert by_phase == {"Pending": 1, "Active": 1, "Failed": 1, "Terminating": 0, "Unknown": 1}
    longest = families["aitenant_tenants_outside_active_longest_seconds"].samples[0].value
    assert longest == 1800


def test_an_active_tenant_has_not_left_active():
    assert left_steady_at(tenant("Active", "2026-01-01T10:00:00Z"), "Active") is None
    assert left_steady_at(tenant("Pending"), "Active") == datetime.datetime(
        2026, 1, 1, 11, 0, tzinfo=datetime.UTC
    )


def test_tracking_again_replaces_the_source():
    metrics = Metrics()
    metrics.track_phases(
        lambda: [tenant("Failed", "2026-01-01T11:00:00Z")],
        metric=METRIC,
        noun="AITenants",
        phases=PHASES,
        steady="Active",
    )
    metrics.track_phases(list, metric=METRIC, noun="AITenants", phases=PHASES, steady="Active")
    assert samples(metrics)[("aitenant_tenants", (("phase", "Failed"),))] == 0


def test_each_informer_cache_reports_its_objects_and_packed_bytes():
    tenants = Informer(AsyncClient(CONFIG), AITenant)
    namespaces = Informer(AsyncClient(CONFIG), Namespace, namespace=None)
    for name in ("a", "b"):
        tenants._apply("ADDED", {"metadata": {"name": name, "namespace": "ai-tenants"}, "spec": {}})
    metrics = Metrics()
    informers = [tenants, namespaces]
    metrics.track_caches(lambda: informers)
    metrics.track_caches(lambda: informers)  # a rebuilt app replaces the source
    got = samples(metrics)
    tenant_labels = (("kind", "AITenant"), ("namespace", "*"))
    assert got[("aitenant_informer_objects", tenant_labels)] == 2
    assert got[("aitenant_informer_bytes", tenant_labels)] == tenants.stored_bytes() > 0
    namespace_labels = (("kind", "Namespace"), ("namespace", ""))
    assert got[("aitenant_informer_objects", namespace_labels)] == 0
    assert got[("aitenant_informer_bytes", namespace_labels)] == 0
