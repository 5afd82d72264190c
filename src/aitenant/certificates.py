"""TLS server certificates signed by a CA we hold: the one X.509 recipe behind the tenants'
maas-api certificates (``platform.certs``) and the charm's fallback webhook certificate
(``aitenant_charm.pki``). Pure: everything, ``now`` included, is passed in."""

from __future__ import annotations

import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

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
