"""The internal CA of docs/differences.md D9: created by the leader, kept in a secret, rotated
in time."""

from __future__ import annotations

import base64
import datetime

import pytest
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from tests.juju.kit import CharmKit, near_expiry_ca

from aitenant_charm import pki
from aitenant_charm.internal_ca import INTERNAL_CA_LABEL
from aitenant_charm.workload import MAAS_API_CA_FILE, WEBHOOK_CERT_DIR

NOW = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)


def test_leader_creates_the_ca_in_an_app_secret(ready: CharmKit):
    # GIVEN a leader that reconciled
    # WHEN we read the app secret
    content = ready.secret(INTERNAL_CA_LABEL)
    # THEN it holds a CA that may sign leaf certificates
    cert = pki.load_certificate(content["ca-cert"])
    constraints = cert.extensions.get_extension_for_class(pki.x509.BasicConstraints).value
    assert constraints.ca is True
    assert constraints.path_length == 0
    assert "PRIVATE KEY" in content["ca-key"]
    assert "previous-ca-cert" not in content


def test_ca_is_stable_across_reconciles(ready: CharmKit):
    # GIVEN a created CA
    first = ready.secret(INTERNAL_CA_LABEL)
    # WHEN more events reconcile
    ready.emit("update_status")
    ready.emit("config_changed")
    # THEN the same CA is kept (no new secret revision content)
    assert ready.secret(INTERNAL_CA_LABEL) == first


def test_ca_rotated_when_near_expiry(ready: CharmKit):
    # GIVEN a CA with a tenth of its lifetime left
    old = near_expiry_ca(datetime.datetime.now(datetime.UTC))
    ready.set_secret_content(INTERNAL_CA_LABEL, {"ca-cert": old.cert_pem, "ca-key": old.key_pem})
    # WHEN update-status reconciles
    ready.emit("update_status")
    # THEN a new CA replaces it and the old one is kept for trust until it expires
    content = ready.secret(INTERNAL_CA_LABEL)
    assert content["ca-cert"] != old.cert_pem
    assert content["previous-ca-cert"] == old.cert_pem
    # AND the workload gets the new CA (the controller re-reads the file on change)
    assert ready.read(MAAS_API_CA_FILE) == content["ca-cert"]
    # AND the webhook certificate is re-issued from the new CA
    served = ready.read(f"{WEBHOOK_CERT_DIR}/tls.crt")
    assert pki.issued_by(served, content["ca-cert"])
    # AND the webhook trusts both CAs during the changeover
    webhook = [
        c.args[0]
        for c in ready.kube.apply.call_args_list
        if isinstance(c.args[0], ValidatingWebhookConfiguration)
    ][-1]
    bundle = base64.b64decode(webhook.webhooks[0].clientConfig.caBundle).decode()
    assert content["ca-cert"] in bundle
    assert old.cert_pem in bundle


def test_ca_rotation_never_restarts_the_controller(ready: CharmKit):
    # GIVEN a planned controller
    before = ready.service().to_dict()
    ready.reconcile()
    # WHEN the CA is rotated
    old = near_expiry_ca(datetime.datetime.now(datetime.UTC))
    ready.set_secret_content(INTERNAL_CA_LABEL, {"ca-cert": old.cert_pem, "ca-key": old.key_pem})
    ready.emit("update_status")
    # THEN the new CA is in the workload's files
    assert ready.read(MAAS_API_CA_FILE) != old.cert_pem
    # AND the service definition is unchanged, so Pebble does not restart the controller
    # (it re-reads its CA and webhook certificate files when they change)
    assert ready.service().to_dict() == before


def test_non_leader_reads_but_never_rotates(ready: CharmKit):
    # GIVEN a near-expiry CA and a unit that is not the leader
    old = near_expiry_ca(datetime.datetime.now(datetime.UTC))
    ready.set_secret_content(INTERNAL_CA_LABEL, {"ca-cert": old.cert_pem, "ca-key": old.key_pem})
    ready.set_leader(False)
    # WHEN it reconciles
    ready.emit("update_status")
    # THEN the CA is left for the leader to rotate, and the unit uses what is there
    assert ready.secret(INTERNAL_CA_LABEL)["ca-cert"] == old.cert_pem
    assert ready.read(MAAS_API_CA_FILE) == old.cert_pem


# --- aitenant_charm.pki: pure functions ---------------------------------------------------


@pytest.mark.parametrize(
    ("age_days", "renew"),
    [(0, False), (200, False), (240, False), (250, True), (364, True), (400, True)],
)
def test_needs_renewal_with_a_third_of_the_lifetime_left(age_days: int, renew: bool):
    # GIVEN a one-year CA of a given age
    ca = pki.generate_ca(
        "ca", now=NOW - datetime.timedelta(days=age_days), validity=datetime.timedelta(days=365)
    )
    # WHEN we ask whether it needs renewal
    # THEN it does once less than a third (about 122 days) is left
    assert pki.needs_renewal(ca.cert_pem, now=NOW) is renew


def test_unreadable_certificate_needs_renewal():
    # GIVEN garbage where a PEM should be
    # WHEN we check it
    # THEN it is renewed rather than trusted
    assert pki.needs_renewal("not a certificate", now=NOW) is True
    assert pki.is_expired("", now=NOW) is True


def test_server_certificate_is_issued_by_its_ca():
    # GIVEN a CA and another CA
    ca = pki.generate_ca("ca", now=NOW)
    other = pki.generate_ca("other", now=NOW)
    names = pki.service_dns_names("aitenant-k8s", "maas")
    # WHEN a server certificate is issued
    leaf = pki.issue_server_certificate(ca, dns_names=names, now=NOW)
    # THEN it chains to its CA only, carries the Service names, and never outlives the CA
    assert pki.issued_by(leaf.cert_pem, ca.cert_pem)
    assert not pki.issued_by(leaf.cert_pem, other.cert_pem)
    assert pki.dns_names(leaf.cert_pem) == names
    assert names[0] == "aitenant-k8s.maas.svc"
    leaf_cert = pki.load_certificate(leaf.cert_pem)
    ca_cert = pki.load_certificate(ca.cert_pem)
    assert leaf_cert.not_valid_after_utc <= ca_cert.not_valid_after_utc


def test_fingerprint_is_stable_and_distinct():
    # GIVEN two CAs
    a = pki.generate_ca("a", now=NOW)
    b = pki.generate_ca("b", now=NOW)
    # WHEN we fingerprint them
    # THEN each has one fingerprint, different from the other's
    assert pki.der_sha256_fingerprint(a.cert_pem) == pki.der_sha256_fingerprint(a.cert_pem)
    assert pki.der_sha256_fingerprint(a.cert_pem) != pki.der_sha256_fingerprint(b.cert_pem)


def test_next_ca_content_creates_keeps_and_rotates():
    # GIVEN no CA, a fresh CA, and a CA near expiry
    fresh = pki.next_ca_content({}, common_name="ca", now=NOW)
    assert fresh is not None
    old = near_expiry_ca(NOW)
    old_content = {pki.CA_CERT: old.cert_pem, pki.CA_KEY: old.key_pem}
    # WHEN we ask what to store next
    keep = pki.next_ca_content(fresh, common_name="ca", now=NOW)
    rotated = pki.next_ca_content(old_content, common_name="ca", now=NOW)
    # THEN a fresh CA is kept, an old one is replaced and remembered as the previous CA
    assert keep is None
    assert rotated is not None
    assert rotated[pki.CA_CERT] != old.cert_pem
    assert rotated[pki.PREVIOUS_CA_CERT] == old.cert_pem


def test_trust_bundle_drops_an_expired_previous_ca():
    # GIVEN a current CA and a previous CA that has expired
    current = pki.generate_ca("current", now=NOW)
    expired = pki.generate_ca(
        "expired", now=NOW - datetime.timedelta(days=400), validity=datetime.timedelta(days=365)
    )
    content = {
        pki.CA_CERT: current.cert_pem,
        pki.CA_KEY: current.key_pem,
        pki.PREVIOUS_CA_CERT: expired.cert_pem,
    }
    # WHEN the trust bundle is built
    bundle = pki.internal_ca_bundle(content, now=NOW)
    # THEN only the current CA is trusted
    assert bundle.strip() == current.cert_pem.strip()


def test_next_server_content_follows_ca_and_names():
    # GIVEN a server certificate issued for some names by a CA
    ca = pki.generate_ca("ca", now=NOW)
    names = pki.service_dns_names("app", "model")
    first = pki.next_server_content({}, ca=ca, names=names, now=NOW)
    assert first is not None
    # WHEN nothing changed, the CA changed, or the names changed
    same = pki.next_server_content(first, ca=ca, names=names, now=NOW)
    other_ca = pki.generate_ca("other", now=NOW)
    new_ca = pki.next_server_content(first, ca=other_ca, names=names, now=NOW)
    renamed = pki.next_server_content(
        first, ca=ca, names=pki.service_dns_names("app2", "model"), now=NOW
    )
    # THEN it is kept only when nothing changed
    assert same is None
    assert new_ca is not None
    assert pki.issued_by(new_ca[pki.TLS_CERT], other_ca.cert_pem)
    assert renamed is not None
