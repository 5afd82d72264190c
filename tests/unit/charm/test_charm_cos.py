"""COS: the databags of metrics-endpoint and grafana-dashboard, and Pebble log targets."""

from __future__ import annotations

import json

import ops
import pytest
from tests.juju.kit import APP, MODEL, CharmKit

import charm
from aitenant_charm import cos

ALERTS = {
    "AITenantNoLeader",
    "AITenantReconcileErrorsRising",
    "AITenantWorkQueueNotDraining",
    "AITenantWebhookSlow",
    "AITenantStuckOutsideActive",
}


def app_bag(kit: CharmKit, relation_id: int) -> dict[str, str]:
    return dict(kit.relation(relation_id).local_app_data)


# What Juju itself puts in every unit databag.
JUJU_UNIT_KEYS = {"egress-subnets", "ingress-address", "private-address"}


def unit_bag(kit: CharmKit, relation_id: int) -> dict[str, str]:
    """What the charm wrote in this unit's databag."""
    bag = kit.relation(relation_id).local_unit_data
    return {key: value for key, value in bag.items() if key not in JUJU_UNIT_KEYS}


def test_metrics_endpoint_publishes_the_scrape_job_and_topology(ready: CharmKit):
    # GIVEN a healthy leader
    # WHEN Prometheus joins metrics-endpoint
    rel = ready.relate(charm.METRICS_RELATION, "prometheus-k8s")
    bag = app_bag(ready, rel)
    # THEN one job scrapes /metrics on port 8080 of every unit
    assert json.loads(bag["scrape_jobs"]) == [
        {"metrics_path": "/metrics", "static_configs": [{"targets": ["*:8080"]}]}
    ]
    # AND the metadata names the deployment
    metadata = json.loads(bag["scrape_metadata"])
    assert metadata["model"] == MODEL
    assert metadata["application"] == APP
    assert metadata["unit"] == f"{APP}/0"
    assert metadata["charm_name"] == "aitenant-k8s"
    assert metadata["model_uuid"] == ready.state.model.uuid
    # AND the unit says where Prometheus reaches it
    assert unit_bag(ready, rel) == {
        "prometheus_scrape_unit_address": f"{APP}-0.{APP}-endpoints.{MODEL}.svc.cluster.local",
        "prometheus_scrape_unit_name": f"{APP}/0",
    }


def test_alert_rules_are_shipped_scoped_to_the_deployment(ready: CharmKit):
    # GIVEN Prometheus related
    rel = ready.relate(charm.METRICS_RELATION, "prometheus-k8s")
    # WHEN we read the alert rules it got
    rules = json.loads(app_bag(ready, rel)["alert_rules"])
    flat = [rule for group in rules["groups"] for rule in group["rules"]]
    # THEN every rule we ship is there, with a duration and a summary
    assert {rule["alert"] for rule in flat} == ALERTS
    for rule in flat:
        assert rule["for"]
        assert rule["annotations"]["summary"]
        # AND each selects this deployment's series only and carries its labels
        assert "%%juju_topology%%" not in rule["expr"]
        assert f'juju_application="{APP}"' in rule["expr"]
        assert rule["labels"]["juju_model"] == MODEL
        assert rule["labels"]["juju_application"] == APP
    assert all(group["name"].startswith(f"{MODEL}_") for group in rules["groups"])


def test_non_leader_publishes_its_unit_address_only(ready: CharmKit):
    # GIVEN a unit that is not the leader
    ready.set_leader(False)
    # WHEN Prometheus joins
    rel = ready.relate(charm.METRICS_RELATION, "prometheus-k8s")
    # THEN the unit databag is written, the application databag is not
    assert unit_bag(ready, rel)["prometheus_scrape_unit_name"] == f"{APP}/0"
    assert app_bag(ready, rel) == {}


def test_grafana_dashboard_carries_the_compressed_dashboard(ready: CharmKit):
    # GIVEN a healthy leader
    # WHEN Grafana joins grafana-dashboard
    rel = ready.relate(charm.DASHBOARD_RELATION, "grafana-k8s")
    data = json.loads(app_bag(ready, rel)["dashboards"])
    # THEN one template holds our dashboard, LZMA+base64 encoded, with the topology
    (key,) = data["templates"]
    template = data["templates"][key]
    assert key == "file:aitenant"
    assert template["charm"] == "aitenant-k8s"
    assert template["juju_topology"]["application"] == APP
    dashboard = json.loads(cos.decompress(template["content"]))
    titles = " | ".join(panel["title"] for panel in dashboard["panels"])
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    # AND it shows tenants, reconciles, the queue, API requests, the webhook and the leader
    for wanted in ("Tenants by phase", "Reconcile", "queue", "API requests", "webhook", "Leader"):
        assert wanted.lower() in titles.lower(), wanted
    for metric in (
        "aitenant_tenants",
        "aitenant_reconcile_total",
        "aitenant_reconcile_duration_seconds_bucket",
        "aitenant_workqueue_depth",
        "aitenant_api_requests_total",
        "aitenant_webhook_handler_seconds_bucket",
        "aitenant_leader",
    ):
        assert metric in exprs, metric


def test_unchanged_charm_rewrites_no_databag(ready: CharmKit):
    # GIVEN both COS provider relations published
    metrics = ready.relate(charm.METRICS_RELATION, "prometheus-k8s")
    dashboards = ready.relate(charm.DASHBOARD_RELATION, "grafana-k8s")
    before = (app_bag(ready, metrics), app_bag(ready, dashboards))
    # WHEN more events reconcile
    ready.emit("update_status")
    ready.emit("config_changed")
    # THEN the databags hold the same bytes (the dashboard uuid is a content hash)
    assert (app_bag(ready, metrics), app_bag(ready, dashboards)) == before


def loki_unit(url: str) -> dict[str, str]:
    return {"endpoint": json.dumps({"url": url})}


def test_logging_forwards_the_controller_logs_to_each_loki_unit(ready: CharmKit):
    # GIVEN a planned controller
    # WHEN Loki joins logging with two units
    url0 = "http://loki-k8s-0.loki-k8s-endpoints.cos.svc.cluster.local:3100/loki/api/v1/push"
    url1 = "http://loki-k8s-1.loki-k8s-endpoints.cos.svc.cluster.local:3100/loki/api/v1/push"
    rel = ready.relate(charm.LOGGING_RELATION, "loki-k8s", units={0: loki_unit(url0)})
    ready.run(lambda ctx, state: ctx.on.relation_joined(state.get_relation(rel), remote_unit=1))
    ready.update_relation_data(rel, unit=1, unit_data=loki_unit(url1))
    # THEN the plan has one Loki log target per unit, for every service, labelled with topology
    targets = ready.plan().log_targets
    assert {name: t.location for name, t in targets.items()} == {
        "loki-loki-k8s-0": url0,
        "loki-loki-k8s-1": url1,
    }
    target = targets["loki-loki-k8s-0"]
    assert target.type == "loki"
    assert target.services == ["all"]
    assert target.labels is not None
    assert target.labels["juju_application"] == APP
    assert target.labels["juju_unit"] == f"{APP}/0"


def test_logging_relation_removed_stops_forwarding(ready: CharmKit):
    # GIVEN logs forwarded to one Loki unit
    url = "http://loki:3100/loki/api/v1/push"
    rel = ready.relate(charm.LOGGING_RELATION, "loki-k8s", units={0: loki_unit(url)})
    assert ready.plan().log_targets
    # WHEN the relation is removed
    ready.remove_relation(rel)
    # THEN the target stays in the plan (Pebble cannot delete one) but receives no service
    target = ready.plan().log_targets["loki-loki-k8s-0"]
    assert target.services == ["-all"]
    # AND the controller keeps running
    assert ready.status() == ops.ActiveStatus("0 tenants")


@pytest.mark.parametrize(
    "bag", [{}, {"endpoint": "not json"}, {"endpoint": json.dumps({"url": ""})}]
)
def test_loki_unit_without_a_usable_endpoint_is_skipped(bag: dict[str, str]):
    # GIVEN one good Loki unit and one without a usable endpoint
    bags = {"loki/0": loki_unit("http://loki:3100/loki/api/v1/push"), "loki/1": bag}
    # WHEN the endpoints are read
    # THEN only the good one is used
    assert cos.loki_endpoints(bags) == {"loki/0": "http://loki:3100/loki/api/v1/push"}
