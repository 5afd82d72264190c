"""Prometheus metrics with fixed names, zero-initialised so dashboards have series at once.

Each ``Metrics`` owns its registry, so tests (and several managers in one process) never
collide on the global default registry.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

RESULTS = ("success", "requeue", "error")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
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

    def init_controller(self, name: str) -> None:
        for result in RESULTS:
            self.reconcile_total.labels(name, result)
        self.reconcile_seconds.labels(name)
        self.queue_depth.labels(name).set(0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
