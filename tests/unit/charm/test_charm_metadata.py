"""Code constants still match charmcraft.yaml and metadata.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import charm
from aitenant_charm.config import CharmConfig, option_name
from aitenant_charm.flags import controller_args
from aitenant_charm.workload import CONTAINER
from charms.aitenant_k8s.v0 import maas_api

ROOT = Path(__file__).resolve().parents[3]


def _load(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / name).read_text())


@pytest.fixture(scope="module")
def metadata() -> dict[str, Any]:
    return _load("metadata.yaml")


@pytest.fixture(scope="module")
def charmcraft() -> dict[str, Any]:
    return _load("charmcraft.yaml")


def test_container_and_resource(metadata: dict[str, Any]):
    # GIVEN metadata.yaml
    # WHEN we look up the charm's container
    container = metadata["containers"][CONTAINER]
    # THEN it runs the controller-image resource, an OCI image
    assert container["resource"] == "controller-image"
    assert metadata["resources"]["controller-image"]["type"] == "oci-image"


def test_relation_names_and_interfaces(metadata: dict[str, Any]):
    # GIVEN metadata.yaml
    requires = metadata["requires"]
    # WHEN we compare the relation constants
    # THEN each names a declared endpoint with the expected interface, one relation each
    expected = {
        charm.GATEWAY_RELATION: "gateway_metadata",
        charm.MAAS_API_RELATION: maas_api.INTERFACE_NAME,
        charm.CERTIFICATES_RELATION: "tls-certificates",
        charm.LOGGING_RELATION: "loki_push_api",
    }
    assert {name: requires[name]["interface"] for name in requires} == expected
    assert all(requires[name]["limit"] == 1 for name in expected if name != charm.LOGGING_RELATION)
    provides = metadata["provides"]
    assert {name: provides[name]["interface"] for name in provides} == {
        charm.METRICS_RELATION: "prometheus_scrape",
        charm.DASHBOARD_RELATION: "grafana_dashboard",
    }
    # Every COS relation is optional: the charm runs without COS.
    assert all(provides[name]["optional"] for name in provides)
    assert requires[charm.LOGGING_RELATION]["optional"] is True
    assert maas_api.DEFAULT_RELATION_NAME == charm.MAAS_API_RELATION


def test_identity_and_assumptions(metadata: dict[str, Any], charmcraft: dict[str, Any]):
    # GIVEN both files
    # WHEN we read identity and build keys
    # THEN they describe a k8s charm for Juju 3.6 on Ubuntu 24.04 built with uv
    assert metadata["name"] == "aitenant-k8s"
    assert metadata["assumes"] == ["k8s-api", "juju >= 3.6"]
    assert charmcraft["type"] == "charm"
    assert charmcraft["base"] == "ubuntu@24.04"
    assert "amd64" in charmcraft["platforms"]
    assert [part["plugin"] for part in charmcraft["parts"].values()] == ["uv"]
    assert not {"name", "summary", "description"} & charmcraft.keys()


def test_config_options_match_the_pydantic_model(charmcraft: dict[str, Any]):
    # GIVEN the options declared in charmcraft.yaml
    options = charmcraft["config"]["options"]
    # WHEN we compare them with the model's fields
    fields = CharmConfig.model_fields
    # THEN the names match one to one and every default is the model's default
    assert set(options) == {option_name(field) for field in fields}
    for field, info in fields.items():
        assert options[option_name(field)]["default"] == info.default, field
    declared_types = {name: option["type"] for name, option in options.items()}
    assert declared_types["enable-tenant-namespace-discovery"] == "boolean"
    assert declared_types["manage-default-tenant"] == "boolean"


def test_config_options_mirror_controller_flags(charmcraft: dict[str, Any]):
    # GIVEN the controller's flags and the charm's options
    from aitenant.settings import FLAGS

    flags = {flag.option.removeprefix("--") for flag in FLAGS}
    # WHEN we compare names
    # THEN every option is the kebab-case name of a controller flag
    assert set(charmcraft["config"]["options"]) <= flags


def test_controller_args_only_use_known_flags():
    # GIVEN the controller's flags
    from tests.juju.kit import DEFAULT_MAAS_API

    from aitenant.settings import FLAGS
    from aitenant_charm.flags import ControllerInputs, Gateway, Ports, WorkloadPaths

    known = {flag.option for flag in FLAGS}
    inputs = ControllerInputs(
        config=CharmConfig(),
        app="aitenant-k8s",
        gateway=Gateway(namespace="gw", name="gw"),
        maas_api=DEFAULT_MAAS_API.model_copy(update={"service_port": 9000}),
        paths=WorkloadPaths("/c", "/ca.crt", "/ca.key"),
        ports=Ports(webhook=9443, health=8081, metrics=8080),
    )
    # WHEN the charm builds a command line with every optional flag
    args = controller_args(inputs)
    # THEN each flag is one the controller defines
    assert {arg.split("=", 1)[0] for arg in args[1:]} <= known
