"""The ValidatingWebhookConfiguration rendered from manifests/webhook.yaml.j2."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from aitenant import contract
from aitenant.webhook.config import render_webhook_configuration

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def only_webhook(document: dict[str, Any]) -> dict[str, Any]:
    """The AITenant webhook, the only one (the singleton names are the CRDs' CEL rules)."""
    assert document["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert document["kind"] == "ValidatingWebhookConfiguration"
    [webhook] = document["webhooks"]
    assert webhook["name"] == contract.WEBHOOK_NAME
    return webhook


def test_service_variant() -> None:
    document = render_webhook_configuration(
        name="aitenant-k8s",
        ca_bundle_pem=PEM,
        service_name="aitenant-k8s",
        service_namespace="maas",
    )
    assert document["metadata"] == {"name": "aitenant-k8s"}
    webhook = only_webhook(document)
    assert webhook["clientConfig"] == {
        "service": {
            "name": "aitenant-k8s",
            "namespace": "maas",
            "port": 443,
            "path": contract.WEBHOOK_PATH,
        },
        "caBundle": base64.b64encode(PEM).decode(),
    }


def test_url_variant() -> None:
    url = f"https://127.0.0.1:9443{contract.WEBHOOK_PATH}"
    document = render_webhook_configuration(name="e2e", ca_bundle_pem=PEM, url=url)
    client_config = only_webhook(document)["clientConfig"]
    assert client_config == {"url": url, "caBundle": base64.b64encode(PEM).decode()}
    assert base64.b64decode(client_config["caBundle"]) == PEM


def test_policy_fields() -> None:
    webhook = only_webhook(
        render_webhook_configuration(
            name="x", ca_bundle_pem=PEM, service_name="s", service_namespace="n", service_port=8443
        )
    )
    assert webhook["name"] == contract.WEBHOOK_NAME
    assert webhook["clientConfig"]["service"]["port"] == 8443
    assert webhook["rules"] == [
        {
            "apiGroups": [contract.GROUP],
            "apiVersions": [contract.VERSION],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["aitenants"],  # not aitenants/status: status writes pass freely
            "scope": "Namespaced",
        }
    ]
    assert webhook["failurePolicy"] == "Fail"
    assert webhook["sideEffects"] == "None"
    assert webhook["admissionReviewVersions"] == ["v1"]
    assert webhook["timeoutSeconds"] == 10


def test_empty_ca_bundle_is_omitted() -> None:
    document = render_webhook_configuration(
        name="x", ca_bundle_pem=b"", service_name="s", service_namespace="n"
    )
    assert "caBundle" not in only_webhook(document)["clientConfig"]


def test_values_are_quoted_not_interpreted() -> None:
    document = render_webhook_configuration(
        name="yes", ca_bundle_pem=PEM, url="https://h:1/p?a=b#c: d"
    )
    assert document["metadata"]["name"] == "yes"  # not the YAML boolean
    assert only_webhook(document)["clientConfig"]["url"] == "https://h:1/p?a=b#c: d"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "give url, or both"),
        ({"service_name": "s"}, "give url, or both"),
        ({"url": "https://h/p", "service_name": "s"}, "not both"),
        ({"url": "http://h/p"}, "https"),
        ({"service_name": "s", "service_namespace": "n", "service_port": 0}, "service_port"),
    ],
)
def test_invalid_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        render_webhook_configuration(name="x", ca_bundle_pem=PEM, **kwargs)


def test_name_is_required() -> None:
    with pytest.raises(ValueError, match="name"):
        render_webhook_configuration(name="", ca_bundle_pem=PEM, url="https://h/p")
