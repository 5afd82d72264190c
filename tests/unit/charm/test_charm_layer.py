"""The Pebble layer: flags from config and relations, precedence, and when Pebble replans."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from unittest.mock import MagicMock, patch

import ops
import pytest
from tests.juju.kit import APP, DEFAULT_MAAS_API, MODEL, CharmKit

import charm
from aitenant.settings import load_settings
from aitenant_charm.internal_ca import INTERNAL_CA_LABEL, WEBHOOK_CERT_LABEL
from aitenant_charm.workload import (
    MAAS_API_CA_FILE,
    MAAS_API_CA_KEY_FILE,
    SERVICE,
    WEBHOOK_CERT_DIR,
    WORKLOAD_UID,
)
from charms.aitenant_k8s.v0.maas_api import MaasApiAppData


@pytest.fixture
def replan_spy() -> Iterator[MagicMock]:
    """Count Container.replan calls while still running the real method."""
    with patch.object(
        ops.Container, "replan", autospec=True, side_effect=ops.Container.replan
    ) as spy:
        yield spy


def test_layer_carries_flags_from_config_and_relations(kit: CharmKit):
    # GIVEN gateway and maas-api relations and some non-default options
    kit.integrate_gateway(namespace="istio-gw", name="maas-gateway")
    kit.integrate_maas_api()
    kit.configure(
        aitenant_namespace="tenants",
        deletion_timeout="1h30m",
        manage_default_tenant=False,
        log_level="DEBUG",
    )
    # WHEN the charm reconciles
    kit.reconcile()
    # THEN the command has one flag per input, from config or relation data
    flags = kit.flags()
    assert kit.args()[0] == "aitenant-controller"
    assert flags["aitenant-namespace"] == "tenants"
    assert flags["gateway-namespace"] == "istio-gw"
    assert flags["gateway-name"] == "maas-gateway"
    assert flags["enable-tenant-namespace-discovery"] == "true"
    assert flags["deletion-timeout"] == "1h30m"
    assert flags["manage-default-tenant"] == "false"
    assert flags["log-level"] == "debug"
    assert flags["infra-namespace"] == DEFAULT_MAAS_API.infra_namespace
    assert flags["maas-api-image"] == DEFAULT_MAAS_API.image
    assert flags["maas-api-db-secret"] == DEFAULT_MAAS_API.db_secret
    assert flags["maas-api-ca-file"] == MAAS_API_CA_FILE
    assert flags["maas-api-ca-key-file"] == MAAS_API_CA_KEY_FILE
    assert flags["webhook-port"] == "9443"
    assert flags["webhook-cert-dir"] == WEBHOOK_CERT_DIR
    assert flags["health-port"] == "8081"
    assert flags["leader-elect"] == "true"
    assert "maas-api-url-template" not in flags  # default port 8443: controller default


def test_layer_service_environment_and_checks(ready: CharmKit):
    # GIVEN a ready deployment
    # WHEN we read the planned layer
    plan = ready.plan()
    service = plan.services[SERVICE]
    # THEN the service knows its namespace, restarts when not alive, and is probed over HTTP
    assert service.environment["POD_NAMESPACE"] == MODEL
    assert service.on_check_failure == {"alive": "restart"}
    assert service.startup == "enabled"
    assert service.user_id == WORKLOAD_UID
    assert plan.checks["alive"].level == ops.pebble.CheckLevel.ALIVE
    assert plan.checks["alive"].http == {"url": "http://localhost:8081/healthz"}
    assert plan.checks["ready"].level == ops.pebble.CheckLevel.READY
    assert plan.checks["ready"].http == {"url": "http://localhost:8081/readyz"}


def test_config_beats_relation_data(kit: CharmKit):
    # GIVEN relations that name a gateway and an infra namespace
    kit.integrate_gateway(namespace="from-relation", name="relation-gw")
    kit.integrate_maas_api()
    # AND config options that name others
    kit.configure(
        gateway_namespace="from-config", gateway_name="config-gw", infra_namespace="infra"
    )
    # WHEN the charm reconciles
    kit.reconcile()
    # THEN the non-empty config options win
    flags = kit.flags()
    assert flags["gateway-namespace"] == "from-config"
    assert flags["gateway-name"] == "config-gw"
    assert flags["infra-namespace"] == "infra"


def test_relation_fills_what_config_leaves_empty(kit: CharmKit):
    # GIVEN only the gateway name in config, the namespace from the relation
    kit.integrate_gateway(namespace="from-relation", name="relation-gw")
    kit.integrate_maas_api()
    kit.configure(gateway_name="config-gw")
    # WHEN the charm reconciles
    kit.reconcile()
    # THEN each value comes from its own source
    assert kit.flags()["gateway-namespace"] == "from-relation"
    assert kit.flags()["gateway-name"] == "config-gw"


def test_maas_api_port_sets_the_url_template(kit: CharmKit):
    # GIVEN maas-api listening on a non-default port
    kit.integrate_gateway()
    kit.integrate_maas_api(DEFAULT_MAAS_API.model_copy(update={"service_port": 9000}))
    # WHEN the charm reconciles
    kit.reconcile()
    # THEN the revocation URL template uses that port and keeps the placeholders
    template = kit.flags()["maas-api-url-template"]
    assert (
        template == "https://{service}.{namespace}.svc:9000/internal/v1/tenants/{tenant}/api-keys"
    )


def test_command_is_accepted_by_the_controller_settings(ready: CharmKit):
    # GIVEN the command and environment the charm planned
    service = ready.service()
    argv = shlex.split(service.command)[1:]
    # WHEN the controller parses them
    settings = load_settings(argv, dict(service.environment))
    # THEN every flag is known and the values arrive as intended
    assert settings.controller_namespace == MODEL
    assert settings.gateway_namespace == "istio-gw"
    assert settings.enable_tenant_namespace_discovery is True
    assert settings.deletion_timeout == 600.0
    assert str(settings.webhook_cert_dir) == WEBHOOK_CERT_DIR
    assert settings.leader_elect is True


def test_replan_not_repeated_when_layer_unchanged(kit: CharmKit, replan_spy: MagicMock):
    # GIVEN a deployment that has planned the controller once
    kit.make_ready()
    assert replan_spy.call_count == 1
    # WHEN unrelated events reconcile again
    kit.emit("update_status")
    kit.emit("config_changed")
    # THEN Pebble is not replanned
    assert replan_spy.call_count == 1


def test_replan_when_config_changes_the_layer(kit: CharmKit, replan_spy: MagicMock):
    # GIVEN a planned controller
    kit.make_ready()
    # WHEN an option that maps to a flag changes
    kit.configure(log_level="debug")
    # THEN Pebble replans once with the new flag
    assert replan_spy.call_count == 2
    assert kit.flags()["log-level"] == "debug"


def test_new_maas_api_data_changes_the_layer(kit: CharmKit):
    # GIVEN a planned controller
    kit.make_ready()
    [relation] = kit.state.get_relations(charm.MAAS_API_RELATION)
    # WHEN the provider publishes a new image
    new = MaasApiAppData(**{**DEFAULT_MAAS_API.model_dump(), "image": "maas-api:v2"})
    bag: dict[str, str] = {}
    new.dump(bag)
    kit.update_relation_data(relation.id, app_data=bag)
    # THEN the controller gets the new image
    assert kit.flags()["maas-api-image"] == "maas-api:v2"


def test_no_service_without_required_inputs(kit: CharmKit):
    # GIVEN no gateway and no maas-api relation
    # WHEN the charm reconciles
    kit.reconcile()
    # THEN nothing is planned
    assert SERVICE not in kit.plan().services


def test_certificate_files_written_with_private_keys_protected(ready: CharmKit):
    # GIVEN a ready deployment (fallback certificate from the internal CA)
    # WHEN we look at the files in the workload
    # THEN the webhook pair and the maas-api CA pair are there, keys readable by owner only
    ca = ready.secret(INTERNAL_CA_LABEL)
    assert ready.read(MAAS_API_CA_FILE) == ca["ca-cert"]
    assert ready.read(MAAS_API_CA_KEY_FILE) == ca["ca-key"]
    webhook = ready.secret(WEBHOOK_CERT_LABEL)
    assert ready.read(f"{WEBHOOK_CERT_DIR}/tls.crt") == webhook["tls-cert"]
    assert ready.read(f"{WEBHOOK_CERT_DIR}/tls.key") == webhook["tls-key"]
    for key in (MAAS_API_CA_KEY_FILE, f"{WEBHOOK_CERT_DIR}/tls.key"):
        assert ready.path(key).stat().st_mode & 0o777 == 0o600


def test_authorino_namespaces_option_reaches_the_controller(kit: CharmKit):
    # GIVEN the default, then an operator's own Authorino namespaces
    kit.integrate_gateway()
    kit.integrate_maas_api()
    kit.reconcile()
    assert kit.flags()["authorino-namespaces"] == (
        "kuadrant-system,openshift-operators,rh-connectivity-link"
    )
    kit.configure(authorino_namespaces=" my-authorino , kuadrant-system ")
    # WHEN the charm reconciles
    kit.reconcile()
    # THEN the controller gets the trimmed list, and parses it as the flag's value
    assert kit.flags()["authorino-namespaces"] == "my-authorino,kuadrant-system"
    service = kit.service()
    settings = load_settings(shlex.split(service.command)[1:], dict(service.environment))
    assert settings.authorino_namespaces == ("my-authorino", "kuadrant-system")


def test_controller_admits_only_this_apps_pods_and_the_gateways(kit: CharmKit):
    # GIVEN a ready charm with the default gateway-pod-selector
    kit.integrate_gateway()
    kit.integrate_maas_api()
    # WHEN the charm reconciles
    kit.reconcile()
    # THEN the controller admits only the pods Juju labels with this application's name, and
    # the Gateway's pods by the label Istio and OpenShift's Gateway put on them
    # (docs/differences.md D37)
    assert kit.flags()["controller-pod-selector"] == f"app.kubernetes.io/name={APP}"
    assert kit.flags()["gateway-pod-selector"] == "gateway.networking.k8s.io/gateway-name={gateway}"
    service = kit.service()
    settings = load_settings(shlex.split(service.command)[1:], dict(service.environment))
    assert settings.controller_pods == (("app.kubernetes.io/name", APP),)
    assert settings.gateway_pods == (("gateway.networking.k8s.io/gateway-name", "{gateway}"),)


def test_gateway_pod_selector_option_reaches_the_controller(kit: CharmKit):
    # GIVEN an implementation that labels its Gateway pods its own way
    kit.integrate_gateway()
    kit.integrate_maas_api()
    kit.configure(gateway_pod_selector=" example.org/gateway = {gateway} , tier=edge ")
    # WHEN the charm reconciles
    kit.reconcile()
    # THEN the controller gets the trimmed selector and parses it
    assert kit.flags()["gateway-pod-selector"] == "example.org/gateway={gateway},tier=edge"
    service = kit.service()
    settings = load_settings(shlex.split(service.command)[1:], dict(service.environment))
    assert settings.gateway_pods == (("example.org/gateway", "{gateway}"), ("tier", "edge"))
    # AND an empty option admits the whole gateway namespace (docs/differences.md D37)
    kit.configure(gateway_pod_selector="")
    kit.reconcile()
    service = kit.service()
    settings = load_settings(shlex.split(service.command)[1:], dict(service.environment))
    assert settings.gateway_pods == ()


def test_maas_api_max_replicas_option_reaches_the_controller(kit: CharmKit):
    # GIVEN the default ceiling, then a platform administrator's own
    kit.integrate_gateway()
    kit.integrate_maas_api()
    kit.reconcile()
    assert kit.flags()["maas-api-max-replicas"] == "3"
    kit.configure(maas_api_max_replicas=7)
    # WHEN the charm reconciles
    kit.reconcile()
    # THEN the controller gets it, and parses it as the flag's value
    assert kit.flags()["maas-api-max-replicas"] == "7"
    service = kit.service()
    settings = load_settings(shlex.split(service.command)[1:], dict(service.environment))
    assert settings.maas_api_max_replicas == 7
