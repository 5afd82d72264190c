"""X.509 for the controller, and the one recipe the charm shares.

``sign_server_certificate`` is the one way a TLS server certificate is made from a CA we hold:
the tenants' maas-api certificates here and the charm's fallback webhook certificate
(``aitenant_charm.pki``, which imports only it and ``BACKDATE``). The rest is the controller's:
each tenant's maas-api serving certificate, signed by the charm's CA (docs/differences.md D9),
and the CAs the Gateway trusts for TLS to maas-api (docs/platform.md §12).

The charm hands its CA over as files (``--maas-api-ca-file``, ``--maas-api-ca-key-file``). For
each tenant the controller keeps a ``kubernetes.io/tls`` Secret ``maas-api[-t]-serving-cert``
with ``tls.crt``, ``tls.key`` and ``ca.crt``, naming ``maas-api[-t].<infra>.svc`` and
``….svc.cluster.local``, valid 90 days and reissued when ``renewal_reason`` gives a reason.
Everything takes ``now`` explicitly. Words (``pem_sha256`` here, the charm's DER
``fingerprint``): docs/glossary.md §3.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = logging.getLogger(__name__)

# Tolerate clock skew between the signer and whoever checks the certificate.
BACKDATE = dt.timedelta(minutes=5)
# X.509 caps a common name at 64 characters; the full names are in the SAN.
MAX_COMMON_NAME = 64


def sign_server_certificate(
    public_key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey,
    *,
    names: list[str],
    ca_cert: x509.Certificate,
    ca_key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
    now: dt.datetime,
    validity: dt.timedelta,
) -> x509.Certificate:
    """A server certificate for ``names`` (the first is also the common name) and
    ``public_key``, valid from a little before ``now`` for ``validity`` but never past the CA."""
    if not names:
        raise ValueError("a server certificate needs at least one DNS name")
    return (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0][:MAX_COMMON_NAME])])
        )
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + validity, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                # RSA key exchange encrypts with the certificate's key; EC keys only sign.
                key_encipherment=isinstance(public_key, rsa.RSAPublicKey),
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(name) for name in names]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )


VALIDITY = dt.timedelta(days=90)
RENEW_WHEN_REMAINING = 1 / 3

TLS_CERT_KEY = "tls.crt"
TLS_KEY_KEY = "tls.key"
CA_CERT_KEY = "ca.crt"


class CAError(Exception):
    """The CA files are missing or unusable; the message says which and why."""


@dataclass(frozen=True)
class CertificateAuthority:
    cert_pem: str
    key_pem: str

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem.encode())

    def signing_key(self) -> rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey:
        key = serialization.load_pem_private_key(self.key_pem.encode(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
            raise CAError("the maas-api CA key must be an RSA or EC key")
        return key


def load_ca(cert_file: Path, key_file: Path) -> CertificateAuthority:
    """Read and check the CA files (CAError names the file that is wrong)."""
    try:
        cert_pem = cert_file.read_text()
    except OSError as exc:
        raise CAError(f"cannot read --maas-api-ca-file {cert_file}: {exc.strerror}") from None
    try:
        key_pem = key_file.read_text()
    except OSError as exc:
        raise CAError(f"cannot read --maas-api-ca-key-file {key_file}: {exc.strerror}") from None
    ca = CertificateAuthority(cert_pem, key_pem)
    try:
        cert = ca.cert
    except ValueError:
        raise CAError(f"--maas-api-ca-file {cert_file} holds no PEM certificate") from None
    try:
        key = ca.signing_key()
    except (ValueError, TypeError):
        raise CAError(f"--maas-api-ca-key-file {key_file} holds no unencrypted PEM key") from None
    if key.public_key() != cert.public_key():
        raise CAError("--maas-api-ca-key-file does not match --maas-api-ca-file")
    return ca


@dataclass(frozen=True)
class ServingCert:
    cert_pem: str
    key_pem: str
    ca_pem: str

    @property
    def pem_sha256(self) -> str:
        return hashlib.sha256(self.cert_pem.encode()).hexdigest()

    def secret_data(self) -> dict[str, str]:
        """The Secret's ``data`` (base64), as the API server returns it: compares equal."""
        return {
            TLS_CERT_KEY: _b64(self.cert_pem),
            TLS_KEY_KEY: _b64(self.key_pem),
            CA_CERT_KEY: _b64(self.ca_pem),
        }


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def from_secret(secret: dict[str, Any] | None) -> ServingCert | None:
    """The certificate held by a live Secret, or None when it holds none."""
    data = (secret or {}).get("data") or {}
    try:
        cert, key = (base64.b64decode(data[k]).decode() for k in (TLS_CERT_KEY, TLS_KEY_KEY))
        ca = base64.b64decode(data.get(CA_CERT_KEY, "")).decode()
    except (KeyError, ValueError, binascii.Error):
        return None
    return ServingCert(cert, key, ca)


def dns_names(service: str, namespace: str) -> list[str]:
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def renewal_reason(
    current: ServingCert | None,
    ca: CertificateAuthority,
    names: list[str],
    *,
    now: dt.datetime,
    threshold: float = RENEW_WHEN_REMAINING,
) -> str | None:
    """Why ``current`` must be replaced, or None when it is good to keep."""
    if current is None:
        return "no certificate yet"
    try:
        cert = x509.load_pem_x509_certificate(current.cert_pem.encode())
        key = serialization.load_pem_private_key(current.key_pem.encode(), password=None)
    except (ValueError, TypeError):
        return "the certificate or key is unreadable"
    if current.ca_pem.strip() != ca.cert_pem.strip():
        return "the CA changed"
    try:
        cert.verify_directly_issued_by(ca.cert)
    except (ValueError, TypeError, InvalidSignature):
        return "not issued by the current CA"
    if key.public_key() != cert.public_key():
        return "the key does not match the certificate"
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        have = sorted(san.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        have = []
    if have != sorted(names):
        return f"names {have} differ from {sorted(names)}"
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    lifetime = (end - start).total_seconds()
    if lifetime <= 0 or (end - now).total_seconds() < threshold * lifetime:
        return "it expires soon"
    return None


def issue(
    ca: CertificateAuthority,
    names: list[str],
    *,
    now: dt.datetime,
    validity: dt.timedelta = VALIDITY,
) -> ServingCert:
    """A TLS server certificate for ``names`` (the first is also the common name)."""
    ca_cert = ca.cert
    ca_key = ca.signing_key()
    key = ec.generate_private_key(ec.SECP256R1())  # fast to make, one per tenant
    cert = sign_server_certificate(
        key.public_key(), names=names, ca_cert=ca_cert, ca_key=ca_key, now=now, validity=validity
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    return ServingCert(cert_pem, key_pem, ca.cert_pem)


def gateway_trust_bundle(
    current_ca_pem: str, trusted_before: str | None, *, rolled_out: bool
) -> str:
    """The CAs the Gateway is to trust for TLS to maas-api (docs/platform.md §12):
    ``current_ca_pem``, and while some maas-api pod may still serve a certificate from before a
    CA change (``rolled_out`` false), also every other CA the bundle held (``trusted_before``),
    so that no pod is unverifiable until it restarts. The same inputs give the same text, so
    a rollout in progress rewrites nothing."""
    if rolled_out or not trusted_before:
        return current_ca_pem
    try:
        current = x509.load_pem_x509_certificates(current_ca_pem.encode())
        earlier = x509.load_pem_x509_certificates(trusted_before.encode())
    except ValueError:  # unreadable: trust only what signs the certificates now
        return current_ca_pem
    kept = [
        ca.public_bytes(serialization.Encoding.PEM).decode() for ca in earlier if ca not in current
    ]
    if not kept:
        return current_ca_pem
    return current_ca_pem.rstrip("\n") + "\n" + "".join(kept)


class CALoader:
    """The charm's CA from ``--maas-api-ca-file``/``--maas-api-ca-key-file``, re-read on change."""

    def __init__(self, cert_file: Path | None, key_file: Path | None) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self._stamp: tuple[float, float] | None = None
        self._ca: CertificateAuthority | None = None

    def load(self) -> CertificateAuthority:
        if self.cert_file is None:
            raise CAError("--maas-api-ca-file is not set")
        if self.key_file is None:
            raise CAError("--maas-api-ca-key-file is not set")
        try:
            stamp = (self.cert_file.stat().st_mtime, self.key_file.stat().st_mtime)
        except OSError:
            stamp = None
        if self._ca is None or stamp is None or stamp != self._stamp:
            self._ca = load_ca(self.cert_file, self.key_file)
            self._stamp = stamp
        return self._ca


class ServingCerts:
    """The certificate each tenant's maas-api Service should serve, in namespace ``infra``."""

    def __init__(self, ca: CALoader, infra: str, now: Callable[[], dt.datetime]) -> None:
        self.ca = ca
        self.infra = infra
        self.now = now
        # Certificates issued but maybe not yet seen by the cache, by Service name.
        self._issued: dict[str, ServingCert] = {}

    def for_service(self, current: ServingCert | None, service: str) -> ServingCert:
        """``current`` (the live Secret's) while it is good, else a new one (CAError when
        the CA cannot be loaded)."""
        ca = self.ca.load()
        names = dns_names(service, self.infra)
        now = self.now()
        reason = renewal_reason(current, ca, names, now=now)
        if reason is None:
            assert current is not None
            self._issued.pop(service, None)
            return current
        # The cache may not have seen the Secret we wrote a moment ago: never issue twice.
        issued = self._issued.get(service)
        if issued is not None and renewal_reason(issued, ca, names, now=now) is None:
            return issued
        log.info("serving certificate for %s.%s: issuing (%s)", service, self.infra, reason)
        self._issued[service] = issue(ca, names, now=now)
        return self._issued[service]
