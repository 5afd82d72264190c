"""What a MaasTenantConfig asks for: its tenant, replicas and telemetry (``spec.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from aitenant import contract
from aitenant.controllers.tenant_config.spec import (
    Replicas,
    check_identity,
    refuse_replicas,
    replicas_for,
    telemetry_of,
)
from aitenant.errors import StepFailed
from aitenant.platform.render import Telemetry
from aitenant.resources import AITenantView


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


def owned_config(tenant: str = "red", namespace: str = "ai-tenant-red") -> dict[str, Any]:
    """A config as its AITenant stamps it."""
    return config(
        namespace,
        labels={contract.LABEL_TENANT_NAME: tenant, contract.LABEL_TENANT_NAMESPACE: namespace},
        annotations={
            contract.ANNOTATION_AITENANT_NAME: tenant,
            contract.ANNOTATION_AITENANT_NAMESPACE: "ai-tenants",
        },
    )


def owner(name: str = "red") -> AITenantView:
    return AITenantView({"metadata": {"name": name, "namespace": "ai-tenants"}})


def test_identity_is_the_owner_when_everything_agrees() -> None:
    assert check_identity(owned_config(), owner()) == "red"
    default = owned_config("models-as-a-service", "models-as-a-service")
    assert check_identity(default, owner("models-as-a-service")) == "models-as-a-service"


@pytest.mark.parametrize(
    ("where", "key", "value", "found", "expected"),
    [
        (
            "labels",
            contract.LABEL_TENANT_NAME,
            "models-as-a-service",
            '"models-as-a-service"',
            "red",
        ),
        (
            "labels",
            contract.LABEL_TENANT_NAMESPACE,
            "models-as-a-service",
            '"models-as-a-service"',
            "ai-tenant-red",
        ),
        ("labels", contract.LABEL_MANAGED_BY_AITENANT, "false", '"false"', "true"),
        ("annotations", contract.ANNOTATION_AITENANT_NAME, "bob", '"bob"', "red"),
        ("annotations", contract.ANNOTATION_AITENANT_NAMESPACE, "x", '"x"', "ai-tenants"),
        ("labels", contract.LABEL_TENANT_NAME, None, None, "red"),
    ],
)
def test_identity_refuses_what_a_tenant_admin_wrote(
    where: str, key: str, value: str | None, found: str | None, expected: str
) -> None:
    """A tenant admin may write the config's labels and annotations; none of them can make it
    another tenant's (docs/contract.md §3.7)."""
    edited = owned_config()
    if value is None:
        del edited["metadata"][where][key]
    else:
        edited["metadata"][where][key] = value
    with pytest.raises(StepFailed) as info:
        check_identity(edited, owner())
    assert info.value.reason == "InvalidTenantConfig"
    what = where[:-1]
    said = f"is {found}" if found else "is missing"
    assert info.value.message.startswith(f'{what} {key} {said}; expected "{expected}": ')
    assert "belongs to AITenant ai-tenants/red" in info.value.message


def test_replicas_from_the_annotation_within_1_to_the_ceiling() -> None:
    annotation = contract.ANNOTATION_MAAS_API_REPLICAS
    assert replicas_for(config(), 2, 3) == Replicas(2)
    assert replicas_for(config(annotations={annotation: "1"}), 2, 3) == Replicas(1)
    assert replicas_for(config(annotations={annotation: "3"}), 2, 3) == Replicas(3)
    assert replicas_for(config(annotations={annotation: "100"}), 2, 100) == Replicas(100)
    for bad in ("0", "-1", "two", ""):
        assert replicas_for(config(annotations={annotation: bad}), 1, 3) == Replicas(
            1,
            f'annotation {annotation}="{bad}" is not a whole number from 1 to 3; maas-api '
            "runs the default 1 (--maas-api-replicas)",
        )


@pytest.mark.parametrize("asked", ["4", "10", "101", "500"])
def test_replicas_above_the_ceiling_run_the_default_and_say_why(asked: str) -> None:
    annotation = contract.ANNOTATION_MAAS_API_REPLICAS
    replicas = replicas_for(config(annotations={annotation: asked}), 2, 3)
    assert replicas.count == 2
    assert replicas.refusal == (
        f'annotation {annotation}="{asked}" exceeds the platform\'s limit 3 '
        "(--maas-api-max-replicas / charm option maas-api-max-replicas); maas-api runs the "
        "default 2 (--maas-api-replicas)"
    )
    with pytest.raises(StepFailed) as info:
        refuse_replicas(replicas)
    assert info.value.reason == "InvalidTenantConfig"
    assert info.value.message == replicas.refusal
    refuse_replicas(Replicas(2))  # nothing refused: nothing raised


@pytest.mark.parametrize("raw", ["7" * 40_000, "x" * 40_000])
def test_a_huge_annotation_value_is_quoted_cut(raw: str) -> None:
    annotation = contract.ANNOTATION_MAAS_API_REPLICAS
    refusal = replicas_for(config(annotations={annotation: raw}), 1, 3).refusal
    assert refusal is not None
    assert f'="{raw[:64]}…" (40000 characters) ' in refusal
    assert len(refusal) < 400


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
