"""aitenant_charm.config (option parsing) and .flags (gateway precedence): pure functions."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from aitenant_charm.config import CharmConfig, describe_error
from aitenant_charm.flags import GatewayFacts, resolve_gateway


def _error(**options: object) -> tuple[str, str]:
    with pytest.raises(ValidationError) as caught:
        CharmConfig.model_validate(options)
    return describe_error(caught.value)


def test_defaults_mirror_the_flags_with_discovery_on():
    # GIVEN no options
    # WHEN the model is built
    config = CharmConfig()
    # THEN defaults are the controller's, except discovery, which the charm turns on
    assert config.aitenant_namespace == "ai-tenants"
    assert config.maas_subscription_namespace == "models-as-a-service"
    assert config.enable_tenant_namespace_discovery is True
    assert config.deletion_timeout_seconds == 600.0
    assert config.manage_default_tenant is True
    assert config.log_level == "info"
    assert config.maas_api_max_replicas == 3


def test_zero_deletion_timeout_disables():
    # GIVEN a zero timeout
    # WHEN it is parsed
    # THEN it is accepted as "disabled"
    assert CharmConfig(deletion_timeout="0").deletion_timeout_seconds == 0.0


def test_values_are_trimmed():
    # GIVEN values with stray whitespace
    config = CharmConfig.model_validate({"gateway_namespace": " gw ", "log_level": " WARNING "})
    # WHEN they are parsed
    # THEN they are normalised
    assert config.gateway_namespace == "gw"
    assert config.log_level == "warning"


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"deletion_timeout": "10 minutes"}, "deletion-timeout"),
        ({"infra_namespace": "UPPER"}, "infra-namespace"),
        ({"maas_subscription_namespace": ""}, "maas-subscription-namespace"),
        ({"log_level": "trace"}, "log-level"),
        ({"maas_api_max_replicas": 0}, "maas-api-max-replicas"),
        ({"maas_api_max_replicas": 101}, "maas-api-max-replicas"),
    ],
)
def test_errors_name_the_juju_option(options: dict[str, object], option: str):
    # GIVEN one invalid option
    # WHEN it is parsed
    name, reason = _error(**options)
    # THEN the error names the kebab-case option and gives a reason
    assert name == option
    assert reason


def test_gateway_precedence_per_value():
    # GIVEN a relation that names both values, and config that names one
    related = GatewayFacts(namespace="rel-ns", name="rel-gw")
    config = CharmConfig(gateway_name="cfg-gw")
    # WHEN the gateway is resolved
    gateway, missing = resolve_gateway(config, related)
    # THEN config wins where set, the relation fills the rest
    assert gateway is not None
    assert (gateway.namespace, gateway.name) == ("rel-ns", "cfg-gw")
    assert missing == []


def test_gateway_missing_lists_the_options():
    # GIVEN neither config nor relation
    # WHEN the gateway is resolved
    gateway, missing = resolve_gateway(CharmConfig(), None)
    # THEN both options are reported missing
    assert gateway is None
    assert missing == ["gateway-namespace", "gateway-name"]
