"""The charm's X.509 code, all of it, as pure functions: reading PEM (bundles, names,
issuers, fingerprints), and the internal CA (docs/differences.md D9) and what it issues.

The leader creates one CA with ``cryptography`` and keeps it in a Juju application secret.
Two things hang off it:

- the controller signs each tenant's maas-api serving certificate with it (the charm writes the
  CA certificate and key into the workload as ``--maas-api-ca-file``/``--maas-api-ca-key-file``);
- when no ``certificates`` relation exists, the charm issues the webhook serving certificate
  from it and puts the CA into the webhook configuration's ``caBundle``.

A fingerprint here is ``der_sha256_fingerprint``: the SHA-256 of the DER encoding, so a
certificate has one fingerprint whatever its PEM text. Everything takes ``now`` explicitly so
tests can place a certificate anywhere in its life. A certificate is renewed once less than
:data:`RENEW_WHEN_REMAINING` of its lifetime is left.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from aitenant.certificates import BACKDATE, sign_server_certificate

CA_VALIDITY = datetime.timedelta(days=365)
SERVER_VALIDITY = datetime.timedelta(days=90)
# Renew with a third of the lifetime left: about four months for the CA, a month for the
# webhook certificate, so a missed update-status or two never lets one expire.
RENEW_WHEN_REMAINING = 1 / 3
_KEY_SIZE = 2048

# Keys of the Juju secrets holding the CA and the fallback webhook certificate.
CA_CERT = "ca-cert"
CA_KEY = "ca-key"
PREVIOUS_CA_CERT = "previous-ca-cert"
TLS_CERT = "tls-cert"
TLS_KEY = "tls-key"


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM (PKCS#8, unencrypted) private key."""

    cert_pem: str
    key_pem: str


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=_KEY_SIZE)


def _key_pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def load_certificate(pem: str) -> x509.Certificate:
    """Parse the first certificate of a PEM string (ValueError if there is none)."""
    return x509.load_pem_x509_certificate(pem.encode())


def generate_ca(
    common_name: str, *, now: datetime.datetime, validity: datetime.timedelta = CA_VALIDITY
) -> KeyPair:
    """A self-signed CA that may sign leaf certificates only (path length 0)."""
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(_cert_pem(cert), _key_pem(key))


def issue_server_certificate(
    ca: KeyPair,
    *,
    dns_names: list[str],
    now: datetime.datetime,
    validity: datetime.timedelta = SERVER_VALIDITY,
) -> KeyPair:
    """A TLS server certificate for ``dns_names`` (the first is the CN), signed by ``ca``."""
    ca_cert = load_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    if not isinstance(ca_key, rsa.RSAPrivateKey):
        raise ValueError("the internal CA key must be an RSA key")
    key = _new_key()
    cert = sign_server_certificate(
        key.public_key(),
        names=dns_names,
        ca_cert=ca_cert,
        ca_key=ca_key,
        now=now,
        validity=validity,
    )
    return KeyPair(_cert_pem(cert), _key_pem(key))


def remaining_fraction(cert_pem: str, *, now: datetime.datetime) -> float:
    """How much of the certificate's lifetime is left, from 1.0 (new) to 0.0 (expired)."""
    cert = load_certificate(cert_pem)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    lifetime = (end - start).total_seconds()
    if lifetime <= 0:
        return 0.0
    left = (end - now).total_seconds()
    return max(0.0, min(1.0, left / lifetime))


def needs_renewal(
    cert_pem: str, *, now: datetime.datetime, threshold: float = RENEW_WHEN_REMAINING
) -> bool:
    """True when less than ``threshold`` of the lifetime is left, or the PEM is unreadable."""
    try:
        return remaining_fraction(cert_pem, now=now) < threshold
    except ValueError:
        return True


def is_expired(cert_pem: str, *, now: datetime.datetime) -> bool:
    """True when the certificate is past its end of validity (or unreadable)."""
    try:
        return load_certificate(cert_pem).not_valid_after_utc <= now
    except ValueError:
        return True


def issued_by(cert_pem: str, ca_cert_pem: str) -> bool:
    """True when ``ca_cert_pem`` signed ``cert_pem``."""
    try:
        load_certificate(cert_pem).verify_directly_issued_by(load_certificate(ca_cert_pem))
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def dns_names(cert_pem: str) -> list[str]:
    """The DNS subject alternative names of a certificate, in order."""
    try:
        ext = load_certificate(cert_pem).extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        )
    except (ValueError, x509.ExtensionNotFound):
        return []
    return ext.value.get_values_for_type(x509.DNSName)


def join_pem(pems: list[str]) -> str:
    """Concatenate PEM blocks, one newline after each, skipping empty ones."""
    return "".join(pem.strip() + "\n" for pem in pems if pem.strip())


def split_pem(bundle: str) -> list[str]:
    """The certificates of a PEM bundle, each as one PEM block."""
    end = "-----END CERTIFICATE-----"
    return [block.strip() + "\n" + end + "\n" for block in bundle.split(end)[:-1] if block.strip()]


def same_certificate(a_pem: str, b_pem: str) -> bool:
    """True when the first certificates of two PEM strings are the same certificate."""
    try:
        return der_sha256_fingerprint(a_pem) == der_sha256_fingerprint(b_pem)
    except ValueError:
        return False


def merge_bundles(new: str, old: str, *, now: datetime.datetime) -> str:
    """``new`` followed by each certificate of ``old`` not in it and not expired."""
    seen: set[str] = set()
    merged: list[str] = []
    for index, pem in enumerate([*split_pem(new), *split_pem(old)]):
        try:
            key = der_sha256_fingerprint(pem)
        except ValueError:
            continue
        from_old = index >= len(split_pem(new))
        if key in seen or (from_old and is_expired(pem, now=now)):
            continue
        seen.add(key)
        merged.append(pem.strip() + "\n")
    return "".join(merged)


def der_sha256_fingerprint(cert_pem: str) -> str:
    """SHA-256 of the certificate's DER encoding, hex: the certificate's identity, whatever
    the PEM text around it (headers, line breaks)."""
    return hashlib.sha256(
        load_certificate(cert_pem).public_bytes(serialization.Encoding.DER)
    ).hexdigest()


def der_sha256_fingerprints(bundle: str) -> list[str]:
    """The fingerprint of every certificate of a PEM bundle, in order."""
    return [der_sha256_fingerprint(pem) for pem in split_pem(bundle)]


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names a client may use for a Kubernetes Service; the API server uses ``.svc``."""
    return [
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
        service,
    ]


# --- Secret contents: what to store next ------------------------------------------------


def ca_from_content(content: Mapping[str, str]) -> KeyPair | None:
    """The CA kept in a secret's content, or None when it is incomplete."""
    if not content.get(CA_CERT) or not content.get(CA_KEY):
        return None
    return KeyPair(content[CA_CERT], content[CA_KEY])


def next_ca_content(
    content: Mapping[str, str], *, common_name: str, now: datetime.datetime
) -> dict[str, str] | None:
    """New CA secret content when the CA is missing or due for rotation; None to keep it.

    A rotated-out CA that has not expired yet is kept as ``previous-ca-cert``, so trust
    bundles keep accepting what it signed while those certificates are replaced.
    """
    current = content.get(CA_CERT, "")
    if content.get(CA_KEY) and not needs_renewal(current, now=now):
        return None
    ca = generate_ca(common_name, now=now)
    new = {CA_CERT: ca.cert_pem, CA_KEY: ca.key_pem}
    if current and not is_expired(current, now=now):
        new[PREVIOUS_CA_CERT] = current
    return new


def internal_ca_bundle(content: Mapping[str, str], *, now: datetime.datetime) -> str:
    """The current CA, plus the previous one while it is still valid, as one PEM bundle."""
    pems = [content.get(CA_CERT, "")]
    previous = content.get(PREVIOUS_CA_CERT, "")
    if previous and not is_expired(previous, now=now):
        pems.append(previous)
    return join_pem(pems)


def next_server_content(
    content: Mapping[str, str], *, ca: KeyPair, names: list[str], now: datetime.datetime
) -> dict[str, str] | None:
    """New server-certificate content, or None to keep the current one.

    A new certificate is issued when there is none, when it was signed by another CA (the CA
    rotated), when it is for other names, or when it is due for renewal.
    """
    cert = content.get(TLS_CERT, "")
    if (
        content.get(TLS_KEY)
        and issued_by(cert, ca.cert_pem)
        and dns_names(cert) == names
        and not needs_renewal(cert, now=now)
    ):
        return None
    issued = issue_server_certificate(ca, dns_names=names, now=now)
    return {TLS_CERT: issued.cert_pem, TLS_KEY: issued.key_pem}
