"""Webhook trust: the serving certificate, the caBundle, and the CA overlap across units.

The webhook serves a certificate from the `certificates` relation, else the fallback one
issued by the internal CA (``internal_ca``). The leader publishes the CA bundle the API server
must trust in our ValidatingWebhookConfiguration. When that CA changes, the configuration
trusts the old and the new CA together until every unit's controller serves the new
certificate (it reloads its files in place), so no AITenant write is refused meanwhile: each
unit publishes on the peer relation the fingerprint of the certificate its controller serves,
read from the webhook port rather than from what the charm wrote, and the leader drops the old
CA only once every planned unit does.
"""

from __future__ import annotations

import base64
import datetime
import logging
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Final

import ops
from charmlibs.interfaces.tls_certificates import (
    CertificateRequestAttributes,
    TLSCertificatesRequiresV4,
)
from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration

from aitenant_charm import cluster_manifests, internal_ca, pki
from aitenant_charm.databag import update_databag
from aitenant_charm.workload import WEBHOOK_PORT

logger = logging.getLogger(__name__)

# Units tell each other which webhook certificate their controller serves (read from the
# controller), so the leader drops an old CA only once every unit serves the new one.
PEERS_RELATION: Final = "aitenant-peers"
# After a webhook CA switch, how long the leader waits in the hook for the controller to
# serve the new certificate (it polls its certificate files every 10 s) before dropping the
# old CA from caBundle. If it is not served by then, the old CA stays until a later event.
WEBHOOK_SETTLE_SECONDS: Final = 30.0
# Peer relation keys: what a unit's controller serves (unit databag), and the CAs the
# leader's current trust bundle holds (application databag). Fingerprints, never PEM.
SERVED_CERT: Final = "webhook-served-cert"
SERVED_CA: Final = "webhook-served-ca"
TRUSTED_CAS: Final = "webhook-trusted-cas"


@dataclass(frozen=True)
class WebhookTLS:
    """The webhook serving certificate, its key, and the CA bundle clients must trust."""

    cert_pem: str
    key_pem: str
    ca_bundle_pem: str


def webhook_tls(
    model: ops.Model,
    certificates: TLSCertificatesRequiresV4,
    request: CertificateRequestAttributes,
    *,
    relation: str,
) -> WebhookTLS | None:
    """The webhook certificate: the one ``certificates`` was assigned for ``request`` while
    the unit has the ``relation``, else the fallback the internal CA issued; None until the
    provider (or the leader) issued it."""
    if model.get_relation(relation) is not None:
        provided, key = certificates.get_assigned_certificate(request)
        if provided is None or key is None:
            return None
        leaf, ca = str(provided.certificate), str(provided.ca)
        intermediates = [str(c) for c in provided.chain if str(c) not in (leaf, ca)]
        return WebhookTLS(
            cert_pem=pki.join_pem([leaf, *intermediates]),
            key_pem=str(key),
            ca_bundle_pem=pki.join_pem([ca]),
        )
    now = datetime.datetime.now(datetime.UTC)
    fallback = internal_ca.fallback_webhook_cert(model, now=now)
    if fallback is None:
        return None
    cert, key, bundle = fallback
    return WebhookTLS(cert_pem=cert, key_pem=key, ca_bundle_pem=bundle)


def keep_webhook_configuration(kube: Client, model: ops.Model, tls: WebhookTLS) -> bool:
    """Leader: publish the CA bundle the API server needs to trust what the webhook serves.

    While a unit still serves a certificate from another CA (a switch of the `certificates`
    relation, or a CA rotation, before its controller reloaded its files), the CAs already
    published stay next to the new one, so no admission is refused in between. Returns True
    while the bundle holds such old CAs.
    """
    published = published_ca_bundle(kube, model)
    bundle = tls.ca_bundle_pem
    switching = published and published.strip() != tls.ca_bundle_pem.strip()
    if switching and units_not_serving(model, tls):
        now = datetime.datetime.now(datetime.UTC)
        bundle = pki.merge_bundles(tls.ca_bundle_pem, published, now=now)
    apply_webhook_configuration(kube, model, bundle)
    return bundle != tls.ca_bundle_pem


def apply_webhook_configuration(kube: Client, model: ops.Model, ca_bundle_pem: str) -> None:
    """Apply our ValidatingWebhookConfiguration, calling the app's Service, with this caBundle."""
    webhook = cluster_manifests.construct_webhook_configuration(
        name=cluster_manifests.cluster_scoped_name(model.app.name, model.name),
        ca_bundle_pem=ca_bundle_pem.encode(),
        service_name=model.app.name,
        service_namespace=model.name,
        port=WEBHOOK_PORT,
    )
    kube.apply(webhook, force=True)


def published_ca_bundle(kube: Client, model: ops.Model) -> str:
    """The caBundle (PEM) of our webhook configuration in the cluster; "" if none."""
    name = cluster_manifests.cluster_scoped_name(model.app.name, model.name)
    try:
        current = kube.get(ValidatingWebhookConfiguration, name)
    except ApiError as exc:
        if exc.status.code == 404:
            return ""
        raise
    for webhook in current.webhooks or []:
        if webhook.clientConfig.caBundle:
            return base64.b64decode(webhook.clientConfig.caBundle).decode()
    return ""


def publish_and_settle(
    kube: Client,
    model: ops.Model,
    tls: WebhookTLS,
    *,
    files_changed: bool,
    running: bool,
    overlapping: bool,
) -> None:
    """After the certificate files were written: when they changed, or caBundle still trusts
    an old CA (``overlapping``, leader), wait (bounded) for the running controller to serve
    them; publish what it serves on the peer relation; then, while overlapping, drop the old
    CA once every unit serves the new certificate."""
    if (files_changed or overlapping) and running:
        wait_for_own_webhook(tls)
    publish_serving(model, tls)
    if overlapping:
        settle_webhook_trust(kube, model, tls)


def settle_webhook_trust(kube: Client, model: ops.Model, tls: WebhookTLS) -> None:
    """Leader: drop the old CAs from caBundle once every unit serves a certificate the new
    bundle trusts; else keep them (a peer's next publication brings the leader back)."""
    lagging = units_not_serving(model, tls)
    if lagging:
        logger.info("old webhook CA kept: not yet serving the new one: %s", lagging)
        return
    try:
        apply_webhook_configuration(kube, model, tls.ca_bundle_pem)
    except ApiError as exc:
        logger.warning("could not drop the previous webhook CA yet: %s", exc)
        return
    logger.info("every unit serves the new certificate; previous CA dropped from caBundle")


def wait_for_own_webhook(tls: WebhookTLS) -> None:
    """After new certificate files: wait (bounded) for this unit's running controller to
    serve them (it polls its files every 10 s), so what it publishes is current."""
    deadline = time.monotonic() + WEBHOOK_SETTLE_SECONDS
    while not workload_serves(tls):
        if time.monotonic() >= deadline:
            logger.info("the controller still serves the previous webhook certificate")
            return
        time.sleep(1)


def publish_serving(model: ops.Model, tls: WebhookTLS) -> None:
    """Publish on the peer relation what this unit's controller serves (read from the
    controller, not from the files); the leader also publishes the CAs it trusts, so a CA
    switch wakes every unit up (an app secret's owner gets no secret-changed)."""
    relation = model.get_relation(PEERS_RELATION)
    if relation is None:
        return
    served = served_certificate("127.0.0.1", WEBHOOK_PORT)
    update_databag(relation.data[model.unit], serving_facts(served, tls.ca_bundle_pem))
    if model.unit.is_leader():
        cas = ",".join(pki.der_sha256_fingerprints(tls.ca_bundle_pem))
        update_databag(relation.data[model.app], {TRUSTED_CAS: cas})


def serving_facts(served_pem: str | None, bundle: str) -> dict[str, str]:
    """What a unit publishes about the certificate its webhook serves: its fingerprint and
    the fingerprint of the CA in ``bundle`` that issued it ("" for none, or nothing served)."""
    if not served_pem:
        return {SERVED_CERT: "", SERVED_CA: ""}
    issuer = next((ca for ca in pki.split_pem(bundle) if pki.issued_by(served_pem, ca)), "")
    return {
        SERVED_CERT: pki.der_sha256_fingerprint(served_pem),
        SERVED_CA: pki.der_sha256_fingerprint(issuer) if issuer else "",
    }


def units_not_serving(model: ops.Model, tls: WebhookTLS) -> list[str]:
    """Units whose controller does not serve a certificate ``tls``'s CA bundle trusts.

    This unit is probed; peers say so on the peer relation (``serving_facts``). Units
    planned but not on the relation yet count as not serving.
    """
    lagging: list[str] = []
    own = serving_facts(served_certificate("127.0.0.1", WEBHOOK_PORT), tls.ca_bundle_pem)
    if not own[SERVED_CA]:
        lagging.append(model.unit.name)
    relation = model.get_relation(PEERS_RELATION)
    peers = relation.units if relation is not None else set()
    trusted = set(pki.der_sha256_fingerprints(tls.ca_bundle_pem))
    for unit in sorted(peers, key=lambda u: u.name):
        assert relation is not None
        if relation.data[unit].get(SERVED_CA) not in trusted:
            lagging.append(unit.name)
    missing = model.app.planned_units() - 1 - len(peers)
    if missing > 0:
        lagging.append(f"{missing} unit(s) not on `{PEERS_RELATION}` yet")
    return lagging


def workload_serves(tls: WebhookTLS) -> bool:
    """True when this unit's webhook port presents the certificate in ``tls``."""
    served = served_certificate("127.0.0.1", WEBHOOK_PORT)
    return served is not None and pki.same_certificate(served, tls.cert_pem)


def served_certificate(host: str, port: int, timeout: float = 2.0) -> str | None:
    """The PEM certificate a TLS server presents (not verified), or None if unreachable."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except OSError:
        return None
    return ssl.DER_cert_to_PEM_cert(der) if der else None
