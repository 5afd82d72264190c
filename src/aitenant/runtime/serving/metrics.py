"""Prometheus metrics with fixed names, zero-initialised so dashboards have series at once.

Each ``Metrics`` owns its registry, so tests (and several managers in one process) never
collide on the global default registry.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from aitenant.runtime.cache.informer import Informer

_C = TypeVar("_C", bound=Collector)

RESULTS = ("success", "requeue", "error")
# An informer's namespace: "*" for every namespace, "" for a cluster-scoped kind.
_CACHE_LABELS = ["kind", "namespace"]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._phases: PhaseCollector | None = None
        self._caches: CacheCollector | None = None
        self.reconcile_total = Counter(
            "aitenant_reconcile_total",
            "Reconciles by controller and result.",
            ["controller", "result"],
            registry=self.registry,
        )
        self.reconcile_seconds = Histogram(
            "aitenant_reconcile_duration_seconds",
            "Time spent in one reconcile.",
            ["controller"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "aitenant_workqueue_depth",
            "Keys waiting in a controller's queue.",
            ["controller"],
            registry=self.registry,
        )
        self.api_requests = Counter(
            "aitenant_api_requests_total",
            "Requests sent to the Kubernetes API by verb and HTTP code.",
            ["verb", "code"],
            registry=self.registry,
        )
        self.api_read_retries = Counter(
            "aitenant_api_read_retries_total",
            "GETs retried inside the client after a 429, a 5xx or a broken connection.",
            registry=self.registry,
        )
        self.webhook_seconds = Histogram(
            "aitenant_webhook_handler_seconds",
            "Time the admission webhook spends deciding one AdmissionReview.",
            buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.1),
            registry=self.registry,
        )
        self.is_leader = Gauge(
            "aitenant_leader",
            "1 while this process holds the leader Lease.",
            registry=self.registry,
        )

    def track_phases(
        self,
        objects: Callable[[], Iterable[Mapping[str, Any]]],
        *,
        metric: str,
        noun: str,
        phases: Iterable[str],
        steady: str,
    ) -> None:
        """Export ``<metric>{phase}`` and the longest time any object spent outside ``steady``,
        computed from ``objects`` (an informer's list, of ``noun``) at each scrape."""
        self._phases = self._replace(
            self._phases, PhaseCollector(objects, tuple(phases), steady, metric=metric, noun=noun)
        )

    def track_caches(self, informers: Callable[[], Iterable[Informer]]) -> None:
        """Export each informer's object count and packed size at each scrape."""
        self._caches = self._replace(self._caches, CacheCollector(informers))

    def _replace(self, old: _C | None, new: _C) -> _C:
        """Register ``new`` in place of ``old``: a rebuilt app (tests restart one) replaces the
        source of a scrape-time collector."""
        if old is not None:
            self.registry.unregister(old)
        self.registry.register(new)
        return new

    def init_controller(self, name: str) -> None:
        for result in RESULTS:
            self.reconcile_total.labels(name, result)
        self.reconcile_seconds.labels(name)
        self.queue_depth.labels(name).set(0)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _parse_time(value: object) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def left_steady_at(obj: Mapping[str, Any], steady: str) -> datetime.datetime | None:
    """When the object left phase ``steady``: None while it is in it.

    The Ready condition's lastTransitionTime marks the change; an object that never had one
    (never reconciled) counts from its creation.
    """
    status = obj.get("status") or {}
    if status.get("phase") == steady:
        return None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            since = _parse_time(condition.get("lastTransitionTime"))
            if since is not None:
                return since
    return _parse_time((obj.get("metadata") or {}).get("creationTimestamp"))


class PhaseCollector(Collector):
    """Objects by ``status.phase``, every phase zero-initialised, and the longest time any
    object has been outside the steady phase (0 when all are in it)."""

    def __init__(
        self,
        objects: Callable[[], Iterable[Mapping[str, Any]]],
        phases: tuple[str, ...],
        steady: str,
        *,
        metric: str,
        noun: str,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self._metric = metric
        self._noun = noun
        self._objects = objects
        self._phases = phases
        self._steady = steady
        self._now = now

    def collect(self) -> Iterator[Metric]:
        counts = dict.fromkeys(self._phases, 0)
        now = self._now()
        longest = 0.0
        for obj in self._objects():
            phase = (obj.get("status") or {}).get("phase") or "Unknown"
            counts[phase] = counts.get(phase, 0) + 1
            since = left_steady_at(obj, self._steady)
            if since is not None:
                longest = max(longest, (now - since).total_seconds())
        by_phase = GaugeMetricFamily(
            self._metric, f"{self._noun} by status.phase.", labels=["phase"]
        )
        for phase, count in counts.items():
            by_phase.add_metric([phase], count)
        yield by_phase
        yield GaugeMetricFamily(
            f"{self._metric}_outside_{self._steady.lower()}_longest_seconds",
            f"Longest time any of the {self._noun} has been outside {self._steady} "
            f"(0 when all are {self._steady}).",
            value=longest,
        )

    def describe(self) -> Iterator[Metric]:
        return iter(())


class CacheCollector(Collector):
    """``aitenant_informer_objects`` and ``aitenant_informer_bytes`` by kind and namespace:
    where the cache's memory goes (docs/design.md §9.5)."""

    def __init__(self, informers: Callable[[], Iterable[Informer]]) -> None:
        self._informers = informers

    def collect(self) -> Iterator[Metric]:
        objects = GaugeMetricFamily(
            "aitenant_informer_objects", "Objects in an informer's cache.", labels=_CACHE_LABELS
        )
        size = GaugeMetricFamily(
            "aitenant_informer_bytes",
            "Bytes of packed JSON in an informer's cache.",
            labels=_CACHE_LABELS,
        )
        for informer in self._informers():
            labels = [informer.kind, informer.namespace or ""]
            objects.add_metric(labels, len(informer))
            size.add_metric(labels, informer.stored_bytes())
        yield objects
        yield size

    def describe(self) -> Iterator[Metric]:
        return iter(())
