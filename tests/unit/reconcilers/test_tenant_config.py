"""The MaasTenantConfig reconciler's pure decisions: identity, readiness, inputs, triggers."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import pytest
import trustme
from lightkube import AsyncClient

from aitenant import contract
from aitenant.errors import StepFailed
from aitenant.platform import certs
from aitenant.platform.cache import PlatformCache
from aitenant.platform.discovery import ApiDiscovery
from aitenant.platform.render import Telemetry
from aitenant.reconcilers.tenant_config import (
    FirstRollouts,
    TenantConfigReconciler,
    deployment_available,
    replicas_for,
    telemetry_of,
    tenant_identity,
)
from aitenant.runtime.controller import Key
from aitenant.runtime.reads import CachedReads
from aitenant.settings import Settings


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


def deployment(generation: int, observed: int, available: str | None) -> dict[str, Any]:
    conds = [] if available is None else [{"type": "Available", "status": available}]
    return {
        "metadata": {"generation": generation},
        "status": {"observedGeneration": observed, "conditions": conds},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (deployment(2, 2, "True"), True),
        (deployment(3, 2, "True"), False),  # a spec change not yet rolled out
        (deployment(2, 2, "False"), False),
        (deployment(1, 0, None), False),
        (None, False),
    ],
)
def test_deployment_available(obj: dict[str, Any] | None, expected: bool) -> None:
    assert deployment_available(obj) is expected


def test_replicas_from_the_annotation() -> None:
    annotation = contract.ANNOTATION_MAAS_API_REPLICAS
    assert replicas_for(config(), 2) == 2
    assert replicas_for(config(annotations={annotation: "0"}), 2) == 0
    assert replicas_for(config(annotations={annotation: "4"}), 2) == 4
    for bad in ("-1", "two", ""):
        with pytest.raises(StepFailed, match=r"maas-api-replicas"):
            replicas_for(config(annotations={annotation: bad}), 1)


def make_reconciler(settings: Settings) -> TenantConfigReconciler:
    """A reconciler for its pure steps: no request is ever made."""
    client = cast(AsyncClient, object())

    async def no_fetch(path: str) -> Any:
        raise AssertionError(f"unexpected discovery request {path}")

    return TenantConfigReconciler(
        client=client,
        settings=settings,
        get_config=lambda _ns, _n: None,
        get_tenant=lambda _ns, _n: None,
        remember=lambda _obj: None,
        reads=CachedReads(client),
        discovery=ApiDiscovery(no_fetch),
        cache=PlatformCache(client, infra_namespace="infra", gateway_namespace="gateways"),
    )


def test_serving_certificate_is_issued_once_and_kept(tmp_path: Path) -> None:
    authority = trustme.CA()
    cert_file, key_file = tmp_path / "ca.crt", tmp_path / "ca.key"
    authority.cert_pem.write_to_path(str(cert_file))
    authority.private_key_pem.write_to_path(str(key_file))
    settings = Settings(
        maas_api_ca_file=cert_file, maas_api_ca_key_file=key_file, infra_namespace="infra"
    )
    reconciler = make_reconciler(settings)
    first = reconciler.serving_cert(None, "maas-api-red")
    # The cache has not seen the Secret yet: the same certificate, not a second one.
    assert reconciler.serving_cert(None, "maas-api-red") == first
    secret: dict[str, Any] = {
        "metadata": {"name": "maas-api-red-serving-cert"},
        "data": first.secret_data(),
    }
    assert reconciler.serving_cert(secret, "maas-api-red") == first
    # An opted-out Secret is rendered as it is, whatever it holds.
    secret["metadata"]["annotations"] = {"opendatahub.io/managed": "false"}
    secret["data"] = {}
    assert reconciler.serving_cert(secret, "maas-api-red") == certs.ServingCert("", "", "")


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


def test_user_metrics_privacy_warning_once_per_generation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reconciler = make_reconciler(Settings())
    key = Key("ai-tenant-red", "default-tenant")
    with caplog.at_level(logging.WARNING, logger="aitenant.reconcilers.tenant_config"):
        for generation in (1, 1, 2):
            reconciler.warn_user_metrics(key, generation)
    warnings = [r for r in caplog.records if "captureUser" in r.getMessage()]
    assert len(warnings) == 2
    assert all(r.levelno == logging.WARNING for r in warnings)
    assert "personal data" in warnings[0].getMessage()


def test_a_first_rollout_holds_the_waiting_status_for_its_window_only() -> None:
    now = [100.0]
    rollouts = FirstRollouts(2.0, clock=lambda: now[0])
    red, blue = Key("ai-tenant-red", "default-tenant"), Key("ai-tenant-blue", "default-tenant")
    # Nothing written yet: no window, the pass says what it found.
    assert rollouts.seconds_left(red, wrote_platform=False) is None
    assert rollouts.seconds_left(red, wrote_platform=True) == 2.0
    now[0] = 101.5
    # A pass woken by the rollout's own events, writing nothing, still waits quietly.
    assert rollouts.seconds_left(red, wrote_platform=False) == 0.5
    assert rollouts.seconds_left(blue, wrote_platform=False) is None
    now[0] = 102.0
    assert rollouts.seconds_left(red, wrote_platform=False) is None  # over: report it
    assert rollouts.seconds_left(red, wrote_platform=False) is None
    assert rollouts.seconds_left(blue, wrote_platform=True) == 2.0
    rollouts.end(blue)  # Available, or the config is gone
    assert rollouts.seconds_left(blue, wrote_platform=False) is None
