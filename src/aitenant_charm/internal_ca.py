"""The internal CA and the fallback webhook certificate, kept in Juju application secrets.

The leader creates the CA and rotates it with a third of its life left (the previous CA stays
trusted until it expires); without a ``certificates`` relation it also issues the webhook
serving certificate from it (docs/differences.md D9). The certificates themselves are built by
``pki``; this module reads and writes the secrets.
"""

from __future__ import annotations

import datetime
import logging
from typing import Final

import ops

from aitenant_charm import pki

logger = logging.getLogger(__name__)

# Juju application secrets (docs/differences.md D9): the internal CA, and the webhook
# certificate issued from it when no `certificates` relation exists.
INTERNAL_CA_LABEL: Final = "internal-ca"
WEBHOOK_CERT_LABEL: Final = "webhook-fallback-cert"


def read_secret(model: ops.Model, label: str) -> tuple[ops.Secret | None, dict[str, str]]:
    """The secret with ``label`` and its latest content; (None, {}) when there is none."""
    try:
        secret = model.get_secret(label=label)
        return secret, secret.get_content(refresh=True)
    except (ops.SecretNotFoundError, ops.ModelError):
        return None, {}


def internal_ca(model: ops.Model) -> pki.KeyPair | None:
    """The current internal CA, or None before the leader created it."""
    return pki.ca_from_content(read_secret(model, INTERNAL_CA_LABEL)[1])


def keep_internal_ca(model: ops.Model, *, now: datetime.datetime) -> None:
    """Leader: create the internal CA, or rotate it when it nears its end."""
    secret, content = read_secret(model, INTERNAL_CA_LABEL)
    name = f"{model.app.name} internal CA ({model.name})"
    new = pki.next_ca_content(content, common_name=name, now=now)
    if new is not None:
        logger.info("%s the internal CA", "rotating" if content else "creating")
        _write_secret(model, secret, INTERNAL_CA_LABEL, new)


def keep_fallback_webhook_cert(
    model: ops.Model, *, names: list[str], now: datetime.datetime
) -> None:
    """Leader, without `certificates`: issue (or reissue) the webhook certificate for
    ``names`` from the internal CA."""
    ca = internal_ca(model)
    if ca is None:
        return
    secret, content = read_secret(model, WEBHOOK_CERT_LABEL)
    new = pki.next_server_content(content, ca=ca, names=names, now=now)
    if new is not None:
        logger.info("issuing the webhook certificate from the internal CA")
        _write_secret(model, secret, WEBHOOK_CERT_LABEL, new)


def fallback_webhook_cert(
    model: ops.Model, *, now: datetime.datetime
) -> tuple[str, str, str] | None:
    """The fallback certificate, its key and the CAs to trust (the internal CA and, after a
    rotation, the previous one until it expires); None until the leader issued it."""
    _, content = read_secret(model, WEBHOOK_CERT_LABEL)
    cert, key = content.get(pki.TLS_CERT), content.get(pki.TLS_KEY)
    bundle = pki.internal_ca_bundle(read_secret(model, INTERNAL_CA_LABEL)[1], now=now)
    if not cert or not key or not bundle:
        return None
    return cert, key, bundle


def _write_secret(
    model: ops.Model, secret: ops.Secret | None, label: str, content: dict[str, str]
) -> None:
    if secret is None:
        model.app.add_secret(content, label=label)
    else:
        secret.set_content(content)
