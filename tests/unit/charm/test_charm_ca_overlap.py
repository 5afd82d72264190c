"""No fail-closed window when the webhook's CA switches: old and new CA overlap in caBundle."""

from __future__ import annotations

import base64
import datetime
from unittest.mock import MagicMock

import pytest
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from tests.juju.kit import APP, MODEL, CharmKit

from aitenant_charm import pki, webhook_trust
from aitenant_charm.cluster_manifests import cluster_scoped_name, construct_webhook_configuration
from aitenant_charm.internal_ca import INTERNAL_CA_LABEL
from aitenant_charm.workload import WEBHOOK_CERT_DIR, WEBHOOK_PORT

NOW = datetime.datetime.now(datetime.UTC)


@pytest.fixture(autouse=True)
def no_settle_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-hook wait for the workload ends at once unless a test serves the cert."""
    monkeypatch.setattr(webhook_trust, "WEBHOOK_SETTLE_SECONDS", 0.0)
    monkeypatch.setattr(webhook_trust.time, "sleep", lambda _: None)


def publish(kube: MagicMock, ca_pem: str) -> None:
    """The cluster's webhook configuration currently trusts ``ca_pem``."""
    kube.get.side_effect = None
    kube.get.return_value = construct_webhook_configuration(
        name=cluster_scoped_name(APP, MODEL),
        ca_bundle_pem=ca_pem.encode(),
        service_name=APP,
        service_namespace=MODEL,
        port=WEBHOOK_PORT,
    )


def applied_bundles(kit: CharmKit) -> list[set[str]]:
    """Fingerprints of the CAs in each caBundle applied, in order."""
    out: list[set[str]] = []
    for webhook in kit.applied(ValidatingWebhookConfiguration):
        pem = base64.b64decode(webhook.webhooks[0].clientConfig.caBundle).decode()
        out.append({pki.der_sha256_fingerprint(p) for p in pki.split_pem(pem)})
    return out


def current_ca(kit: CharmKit) -> str:
    return kit.secret(INTERNAL_CA_LABEL)["ca-cert"]


def test_old_ca_stays_published_until_the_workload_serves_the_new_certificate(
    ready: CharmKit, served: MagicMock
):
    # GIVEN the cluster trusts another CA (e.g. the one of a removed certificates relation)
    old = pki.generate_ca("old", now=NOW)
    publish(ready.kube, old.cert_pem)
    ready.kube.apply.reset_mock()
    # WHEN the charm reconciles while the workload still serves the old certificate
    ready.emit("update_status")
    # THEN caBundle holds the new CA and the old one
    new_fp = pki.der_sha256_fingerprint(current_ca(ready))
    assert applied_bundles(ready)[-1] == {new_fp, pki.der_sha256_fingerprint(old.cert_pem)}
    # WHEN the workload serves the new certificate and another event comes
    served.return_value = ready.read(f"{WEBHOOK_CERT_DIR}/tls.crt")
    ready.emit("update_status")
    # THEN only the new CA is published
    assert applied_bundles(ready)[-1] == {new_fp}


def test_old_ca_dropped_in_the_same_hook_once_the_new_certificate_is_served(
    ready: CharmKit, served: MagicMock, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN another CA published, and a workload that reloads while the hook waits
    monkeypatch.setattr(webhook_trust, "WEBHOOK_SETTLE_SECONDS", 30.0)
    old = pki.generate_ca("old", now=NOW)
    publish(ready.kube, old.cert_pem)
    ready.kube.apply.reset_mock()
    answers = iter([None, None])

    def serve(host: str, port: int) -> str | None:
        return next(answers, ready.read(f"{WEBHOOK_CERT_DIR}/tls.crt"))

    served.side_effect = serve
    # WHEN one event reconciles
    ready.emit("update_status")
    # THEN it first published both CAs, then only the new one
    new_fp = pki.der_sha256_fingerprint(current_ca(ready))
    bundles = applied_bundles(ready)
    assert bundles[0] == {new_fp, pki.der_sha256_fingerprint(old.cert_pem)}
    assert bundles[-1] == {new_fp}


def test_expired_old_ca_is_not_carried_over(ready: CharmKit):
    # GIVEN an expired CA in the published bundle
    expired = pki.generate_ca(
        "expired", now=NOW - datetime.timedelta(days=30), validity=datetime.timedelta(days=1)
    )
    publish(ready.kube, expired.cert_pem)
    ready.kube.apply.reset_mock()
    # WHEN the charm reconciles
    ready.emit("update_status")
    # THEN only the current CA is published
    assert applied_bundles(ready)[-1] == {pki.der_sha256_fingerprint(current_ca(ready))}


def test_first_deployment_publishes_only_its_ca(kit: CharmKit):
    # GIVEN no webhook configuration in the cluster yet (404)
    # WHEN the charm deploys
    kit.make_ready()
    # THEN the bundle is the internal CA alone
    assert applied_bundles(kit)[-1] == {pki.der_sha256_fingerprint(current_ca(kit))}


def test_merge_bundles_keeps_order_and_drops_duplicates():
    a = pki.generate_ca("a", now=NOW).cert_pem
    b = pki.generate_ca("b", now=NOW).cert_pem
    merged = pki.merge_bundles(a, a + b, now=NOW)
    assert pki.split_pem(merged) == [a.strip() + "\n", b.strip() + "\n"]
