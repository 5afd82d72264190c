"""What a MaasTenantConfig asks for: its tenant, replicas and telemetry (config_spec)."""

from __future__ import annotations

from typing import Any

import pytest

from aitenant import contract
from aitenant.errors import StepFailed
from aitenant.platform.render import Telemetry
from aitenant.reconcilers.config_spec import replicas_for, telemetry_of, tenant_identity


def config(
    namespace: str = "ai-tenant-red",
    name: str = "default-tenant",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {contract.LABEL_MANAGED_BY_AITENANT: "true", **(labels or {})},
            "annotations": annotations or {},
            "generation": 1,
        }
    }


def test_identity_from_the_tenant_name_label() -> None:
    assert tenant_identity(config(labels={contract.LABEL_TENANT_NAME: "red"})) == "red"


def test_identity_missing_is_upstreams_error() -> None:
    with pytest.raises(StepFailed) as info:
        tenant_identity(config())
    assert info.value.reason == "InvalidTenantConfig"
    assert info.value.message == (
        "tenant ai-tenant-red/default-tenant has maas.opendatahub.io/managed-by-aitenant=true "
        "but maas.opendatahub.io/tenant-name is missing or empty"
    )


def test_default_tenant_must_be_default_tenant_in_its_own_namespace() -> None:
    default = {
        contract.LABEL_TENANT_NAME: "models-as-a-service",
        contract.LABEL_TENANT_NAMESPACE: "models-as-a-service",
    }
    assert tenant_identity(config("models-as-a-service", labels=default)) == ("models-as-a-service")
    with pytest.raises(StepFailed, match="claims the default tenant"):
        tenant_identity(config("ai-tenant-red", labels=default))
    with pytest.raises(StepFailed, match="claims the default tenant"):
        tenant_identity(config("models-as-a-service", name="other", labels=default))


def test_replicas_from_the_annotation() -> None:
    annotation = contract.ANNOTATION_MAAS_API_REPLICAS
    assert replicas_for(config(), 2) == 2
    assert replicas_for(config(annotations={annotation: "0"}), 2) == 0
    assert replicas_for(config(annotations={annotation: "4"}), 2) == 4
    for bad in ("-1", "two", ""):
        with pytest.raises(StepFailed, match=r"maas-api-replicas"):
            replicas_for(config(annotations={annotation: bad}), 1)


def with_telemetry(telemetry: Any) -> dict[str, Any]:
    return {**config(), "spec": {"telemetry": telemetry}}


@pytest.mark.parametrize(
    ("telemetry", "expected"),
    [
        # No block: no TelemetryPolicy (a new tenant's config has an empty spec).
        (None, None),
        # A block is enabled unless it says otherwise (the CRD default), with the default
        # dimensions: organization and model on, user and group off.
        ({}, Telemetry()),
        ({"enabled": True}, Telemetry()),
        ({"enabled": False}, None),
        ({"enabled": False, "metrics": {"captureUser": True}}, None),
        ({"metrics": {}}, Telemetry()),
        ({"metrics": {"captureOrganization": False}}, Telemetry(organization=False)),
        ({"metrics": {"captureUser": True}}, Telemetry(user=True)),
        ({"metrics": {"captureGroup": True}}, Telemetry(group=True)),
        ({"metrics": {"captureModelUsage": False}}, Telemetry(model_usage=False)),
    ],
)
def test_telemetry_switches_and_defaults(telemetry: Any, expected: Telemetry | None) -> None:
    spec_config = config() if telemetry is None else with_telemetry(telemetry)
    assert telemetry_of(spec_config) == expected


@pytest.mark.parametrize(
    ("telemetry", "message"),
    [
        ({"enabled": "yes"}, "spec.telemetry.enabled must be true or false, not 'yes'"),
        (
            {"metrics": {"captureUser": 1}},
            "spec.telemetry.metrics.captureUser must be true or false, not 1",
        ),
        ({"metrics": []}, "spec.telemetry.metrics must be an object"),
        ("on", "spec.telemetry must be an object"),
    ],
)
def test_telemetry_refuses_what_is_not_a_switch(telemetry: Any, message: str) -> None:
    with pytest.raises(StepFailed) as info:
        telemetry_of(with_telemetry(telemetry))
    assert info.value.reason == "InvalidTenantConfig"
    assert info.value.message == message
