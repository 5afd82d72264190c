"""maas-api serving certificates from the charm's CA (docs/differences.md D9)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from aitenant import certificates

from .conftest import INFRA, NOW

NAMES = certificates.dns_names("maas-api-red-team", INFRA)


def parse(serving: certificates.ServingCert) -> x509.Certificate:
    return x509.load_pem_x509_certificate(serving.cert_pem.encode())


def test_dns_names() -> None:
    assert certificates.dns_names("maas-api-red-team", INFRA) == [
        f"maas-api-red-team.{INFRA}.svc",
        f"maas-api-red-team.{INFRA}.svc.cluster.local",
    ]


def test_issued_certificate(
    ca: certificates.CertificateAuthority, serving: certificates.ServingCert
) -> None:
    cert = parse(serving)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == NAMES
    cert.verify_directly_issued_by(ca.cert)
    assert cert.not_valid_after_utc - NOW == certificates.VALIDITY
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in usage
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert serving.ca_pem == ca.cert_pem


def test_secret_data_round_trip(serving: certificates.ServingCert) -> None:
    secret = {"data": serving.secret_data()}
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    assert certificates.from_secret(secret) == serving
    assert certificates.from_secret(None) is None
    assert certificates.from_secret({"data": {"tls.crt": "not base64!"}}) is None


def test_a_fresh_certificate_is_kept(
    ca: certificates.CertificateAuthority, serving: certificates.ServingCert
) -> None:
    assert certificates.renewal_reason(serving, ca, NAMES, now=NOW) is None
    # 50 days in, 40 of 90 left (> a third): still kept.
    assert certificates.renewal_reason(serving, ca, NAMES, now=NOW + dt.timedelta(days=50)) is None


def test_renewed_well_before_expiry(
    ca: certificates.CertificateAuthority, serving: certificates.ServingCert
) -> None:
    # 61 days in, 29 left: less than a third of 90 days.
    reason = certificates.renewal_reason(serving, ca, NAMES, now=NOW + dt.timedelta(days=61))
    assert reason == "it expires soon"


def test_renewed_when_missing_renamed_or_signed_by_another_ca(
    ca: certificates.CertificateAuthority, serving: certificates.ServingCert
) -> None:
    assert certificates.renewal_reason(None, ca, NAMES, now=NOW) == "no certificate yet"
    other_names = certificates.dns_names("maas-api-blue", INFRA)
    assert "differ" in (certificates.renewal_reason(serving, ca, other_names, now=NOW) or "")
    rotated = trustme.CA()
    new_ca = certificates.CertificateAuthority(
        rotated.cert_pem.bytes().decode(), rotated.private_key_pem.bytes().decode()
    )
    assert certificates.renewal_reason(serving, new_ca, NAMES, now=NOW) == "the CA changed"
    # Same CA certificate text but a certificate it did not sign.
    foreign = certificates.issue(new_ca, NAMES, now=NOW)
    spoofed = certificates.ServingCert(foreign.cert_pem, foreign.key_pem, ca.cert_pem)
    assert (
        certificates.renewal_reason(spoofed, ca, NAMES, now=NOW) == "not issued by the current CA"
    )
    mismatched = certificates.ServingCert(serving.cert_pem, foreign.key_pem, ca.cert_pem)
    assert certificates.renewal_reason(mismatched, ca, NAMES, now=NOW) == (
        "the key does not match the certificate"
    )
    broken = certificates.ServingCert("junk", "junk", ca.cert_pem)
    assert certificates.renewal_reason(broken, ca, NAMES, now=NOW) == (
        "the certificate or key is unreadable"
    )


def test_validity_never_outlives_the_ca(ca: certificates.CertificateAuthority) -> None:
    late = ca.cert.not_valid_after_utc - dt.timedelta(days=10)
    cert = parse(certificates.issue(ca, NAMES, now=late))
    assert cert.not_valid_after_utc == ca.cert.not_valid_after_utc


def test_an_rsa_ca_works(tmp_path: Path) -> None:
    authority = trustme.CA(key_type=trustme.KeyType.RSA)
    cert_file, key_file = tmp_path / "ca.crt", tmp_path / "ca.key"
    authority.cert_pem.write_to_path(str(cert_file))
    authority.private_key_pem.write_to_path(str(key_file))
    ca = certificates.load_ca(cert_file, key_file)
    serving = certificates.issue(ca, NAMES, now=NOW)
    parse(serving).verify_directly_issued_by(ca.cert)


def test_load_ca_names_the_file_that_is_wrong(tmp_path: Path) -> None:
    one, two = trustme.CA(), trustme.CA()
    cert_file, key_file = tmp_path / "ca.crt", tmp_path / "ca.key"
    with pytest.raises(certificates.CAError, match="cannot read --maas-api-ca-file"):
        certificates.load_ca(cert_file, key_file)
    one.cert_pem.write_to_path(str(cert_file))
    with pytest.raises(certificates.CAError, match="cannot read --maas-api-ca-key-file"):
        certificates.load_ca(cert_file, key_file)
    two.private_key_pem.write_to_path(str(key_file))
    with pytest.raises(certificates.CAError, match="does not match"):
        certificates.load_ca(cert_file, key_file)
    key_file.write_text("not a key")
    with pytest.raises(certificates.CAError, match="holds no unencrypted PEM key"):
        certificates.load_ca(cert_file, key_file)


def test_the_gateway_trusts_old_and_new_ca_until_the_rollout_ends() -> None:
    old, new, older = (trustme.CA().cert_pem.bytes().decode() for _ in range(3))
    # Nothing changed, or nothing was trusted before: the current CA alone.
    assert certificates.gateway_trust_bundle(new, new, rolled_out=False) == new
    assert certificates.gateway_trust_bundle(new, None, rolled_out=False) == new
    # A CA change while pods of the old certificate may still serve: both, new first.
    during = certificates.gateway_trust_bundle(new, old, rolled_out=False)
    assert x509.load_pem_x509_certificates(during.encode()) == [
        x509.load_pem_x509_certificate(pem.encode()) for pem in (new, old)
    ]
    # The next passes of the same rollout compute the same text: no rewrite.
    assert certificates.gateway_trust_bundle(new, during, rolled_out=False) == during
    # A second change before the first rolled out keeps every CA a pod may still serve under.
    twice = certificates.gateway_trust_bundle(older, during, rolled_out=False)
    assert len(x509.load_pem_x509_certificates(twice.encode())) == 3
    # Rolled out: the old CAs go.
    assert certificates.gateway_trust_bundle(new, during, rolled_out=True) == new
    # An unreadable bundle is not carried on.
    assert certificates.gateway_trust_bundle(new, "not a certificate", rolled_out=False) == new
