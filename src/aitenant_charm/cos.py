"""Observability through COS: the databags of three relation interfaces.

No library on PyPI implements these interfaces (the Charmhub libraries are vendored copies of
thousands of lines each), so the charm writes the documented databag contract itself:

- ``prometheus_scrape`` (provider, endpoint ``metrics-endpoint``): application data
  ``scrape_jobs``, ``scrape_metadata`` and ``alert_rules`` (JSON strings); unit data
  ``prometheus_scrape_unit_address`` and ``prometheus_scrape_unit_name``. The job's target
  ``*:<port>`` tells Prometheus to scrape that port on every unit address.
- ``grafana_dashboard`` (provider, endpoint ``grafana-dashboard``): application data
  ``dashboards``, a JSON object ``{"templates": {"file:<name>": {...}}, "uuid": ...}`` whose
  ``content`` is the dashboard JSON compressed with LZMA (xz) and base64-encoded.
- ``loki_push_api`` (requirer, endpoint ``logging``): every Loki unit publishes ``endpoint``,
  a JSON object with the push ``url``; Pebble forwards the workload's logs to each of them
  through log targets of type ``loki``.

Everything here is pure except the last two functions, which read and write the relations:
``publish`` (the databags) and ``log_targets_of`` (what the Pebble layer forwards to Loki).

The alert rules (``prometheus_alert_rules/``) and the dashboard (``grafana_dashboards/``) live
in ``src/``, beside the charm's entry point, and ship with the charm.
"""

from __future__ import annotations

import base64
import hashlib
import json
import lzma
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ops
import yaml

from aitenant_charm.databag import update_databag

ALERT_RULES_DIR = Path(__file__).parents[1] / "prometheus_alert_rules"
DASHBOARDS_DIR = Path(__file__).parents[1] / "grafana_dashboards"
# Placeholder in rule expressions, replaced by the deployment's topology label matchers.
TOPOLOGY_PLACEHOLDER = "%%juju_topology%%"
METRICS_PATH = "/metrics"
# Pebble log targets the charm owns are named with this prefix.
LOG_TARGET_PREFIX = "loki-"


@dataclass(frozen=True)
class Topology:
    """Where the charm runs, as COS labels metrics, rules, dashboards and logs."""

    model: str
    model_uuid: str
    application: str
    unit: str
    charm_name: str

    def metadata(self) -> dict[str, str]:
        return {
            "model": self.model,
            "model_uuid": self.model_uuid,
            "application": self.application,
            "unit": self.unit,
            "charm_name": self.charm_name,
        }

    def labels(self) -> dict[str, str]:
        """The juju_* labels that identify this application (no unit: rules span units)."""
        return {
            "juju_model": self.model,
            "juju_model_uuid": self.model_uuid,
            "juju_application": self.application,
            "juju_charm": self.charm_name,
        }

    def matchers(self) -> str:
        """PromQL label matchers selecting this application's series."""
        keys = ("juju_model", "juju_model_uuid", "juju_application")
        return ",".join(f'{key}="{self.labels()[key]}"' for key in keys)


# --- prometheus_scrape ---------------------------------------------------------------------


def load_alert_rules(topology: Topology, folder: Path = ALERT_RULES_DIR) -> dict[str, Any]:
    """Every rule group in ``folder`` (``*.rules``/``*.yaml``), scoped to this deployment.

    Each group name gets the topology as prefix (unique per deployment), each rule the
    juju_* labels, and ``%%juju_topology%%`` in an expression becomes the label matchers.
    """
    groups: list[dict[str, Any]] = []
    prefix = f"{topology.model}_{topology.model_uuid}_{topology.application}"
    for path in sorted([*folder.glob("*.rules"), *folder.glob("*.yaml")]):
        document = yaml.safe_load(path.read_text()) or {}
        for group in document.get("groups") or []:
            rules = []
            for rule in group.get("rules") or []:
                scoped = dict(rule)
                scoped["expr"] = str(rule["expr"]).replace(
                    TOPOLOGY_PLACEHOLDER, topology.matchers()
                )
                scoped["labels"] = {**(rule.get("labels") or {}), **topology.labels()}
                rules.append(scoped)
            groups.append({"name": f"{prefix}_{group['name']}_alerts", "rules": rules})
    return {"groups": groups}


def scrape_app_data(
    topology: Topology, *, port: int, alert_rules: Mapping[str, Any]
) -> dict[str, str]:
    """Application databag of ``metrics-endpoint``: one job for every unit's metrics port."""
    job = {"metrics_path": METRICS_PATH, "static_configs": [{"targets": [f"*:{port}"]}]}
    return {
        "scrape_jobs": json.dumps([job]),
        "scrape_metadata": json.dumps(topology.metadata()),
        "alert_rules": json.dumps(alert_rules, sort_keys=True),
    }


def unit_address(unit: str, application: str, model: str) -> str:
    """The stable DNS name of a sidecar unit's pod (the app's headless Service)."""
    return f"{unit.replace('/', '-')}.{application}-endpoints.{model}.svc.cluster.local"


def scrape_unit_data(unit: str, address: str) -> dict[str, str]:
    """Unit databag of ``metrics-endpoint``: where Prometheus reaches this unit."""
    return {"prometheus_scrape_unit_address": address, "prometheus_scrape_unit_name": unit}


# --- grafana_dashboard ---------------------------------------------------------------------


def compress(text: str) -> str:
    """LZMA (xz) then base64: the encoding of a dashboard's ``content``."""
    return base64.b64encode(lzma.compress(text.encode())).decode()


def decompress(blob: str) -> str:
    return lzma.decompress(base64.b64decode(blob)).decode()


def load_dashboards(folder: Path = DASHBOARDS_DIR) -> dict[str, str]:
    """``{file stem: dashboard JSON}`` for every ``*.json`` in ``folder``."""
    return {path.stem: path.read_text() for path in sorted(folder.glob("*.json"))}


def dashboard_app_data(topology: Topology, dashboards: Mapping[str, str]) -> dict[str, str]:
    """Application databag of ``grafana-dashboard``.

    ``uuid`` changes only when a dashboard does (a hash of the contents), so an unchanged
    charm writes the same bytes and Grafana sees no change.
    """
    templates = {
        f"file:{name}": {
            "charm": topology.charm_name,
            "content": compress(content),
            "juju_topology": {
                "model": topology.model,
                "model_uuid": topology.model_uuid,
                "application": topology.application,
                "unit": topology.unit,
            },
            "inject_dropdowns": True,
            "dashboard_alt_uid": hashlib.sha256(
                f"{topology.application}:{name}".encode()
            ).hexdigest()[:40],
        }
        for name, content in sorted(dashboards.items())
    }
    digest = hashlib.sha256(json.dumps(sorted(dashboards.items())).encode()).hexdigest()
    return {"dashboards": json.dumps({"templates": templates, "uuid": digest}, sort_keys=True)}


# --- loki_push_api -------------------------------------------------------------------------


def loki_endpoints(unit_databags: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """``{remote unit: push URL}`` from the Loki units' ``endpoint`` fields.

    A unit whose field is missing or unreadable is left out (it has not published yet).
    """
    endpoints: dict[str, str] = {}
    for unit, bag in unit_databags.items():
        try:
            url = json.loads(bag.get("endpoint", "")).get("url")
        except (ValueError, AttributeError):
            continue
        if isinstance(url, str) and url:
            endpoints[unit] = url
    return endpoints


def log_target_name(unit: str) -> str:
    return LOG_TARGET_PREFIX + unit.replace("/", "-")


def log_targets(
    endpoints: Mapping[str, str], topology: Topology, *, current: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """Pebble log targets: one per Loki unit, for every service.

    ``current`` maps the log targets already in the plan to their location. One of ours
    whose Loki unit is gone is kept with ``services: ["-all"]``: Pebble cannot delete a
    target from a layer, only stop sending it anything.
    """
    labels = {**topology.labels(), "juju_unit": topology.unit}

    def target(location: str, services: list[str]) -> dict[str, Any]:
        return {
            "override": "replace",
            "type": "loki",
            "location": location,
            "services": services,
            "labels": labels,
        }

    targets = {
        log_target_name(unit): target(url, ["all"]) for unit, url in sorted(endpoints.items())
    }
    for name, location in (current or {}).items():
        if name.startswith(LOG_TARGET_PREFIX) and name not in targets:
            targets[name] = target(location, ["-all"])
    return targets


# --- Reading and writing the relations ----------------------------------------------------


def topology_of(model: ops.Model, charm_name: str) -> Topology:
    """This unit's topology, as Juju names it."""
    return Topology(
        model=model.name,
        model_uuid=model.uuid,
        application=model.app.name,
        unit=model.unit.name,
        charm_name=charm_name,
    )


def publish(
    model: ops.Model,
    topology: Topology,
    *,
    scrape_relation: str,
    dashboard_relation: str,
    metrics_port: int,
) -> None:
    """Publish the scrape job, alert rules and dashboard (leader), and this unit's address,
    on the relations named ``scrape_relation`` and ``dashboard_relation``.

    Writes only what differs, so an unchanged charm leaves the databags untouched.
    """
    unit, app = model.unit, model.app
    address = unit_address(unit.name, app.name, model.name)
    for relation in model.relations[scrape_relation]:
        update_databag(relation.data[unit], scrape_unit_data(unit.name, address))
        if unit.is_leader():
            rules = load_alert_rules(topology)
            data = scrape_app_data(topology, port=metrics_port, alert_rules=rules)
            update_databag(relation.data[app], data)
    if unit.is_leader():
        for relation in model.relations[dashboard_relation]:
            update_databag(relation.data[app], dashboard_app_data(topology, load_dashboards()))


def log_targets_of(
    model: ops.Model, container: ops.Container, topology: Topology, *, loki_relation: str
) -> dict[str, dict[str, Any]]:
    """Pebble log targets for every Loki unit on the relation named ``loki_relation`` (none
    without it), keeping ours already in the container's plan (see ``log_targets``)."""
    bags: dict[str, Mapping[str, str]] = {}
    for relation in model.relations[loki_relation]:
        for unit in relation.units:
            bags[unit.name] = relation.data[unit]
    current = {
        name: target.location or "" for name, target in container.get_plan().log_targets.items()
    }
    return log_targets(loki_endpoints(bags), topology, current=current)
