"""Several units during a webhook CA switch: the old CA goes only once every unit serves the new.

Each unit publishes on the peer relation what its controller serves (read from the webhook
port, not from the files the charm wrote); the leader keeps the old CA in caBundle while any
unit, or any planned unit not on the relation yet, does not serve a certificate from the new
one. Three units under ``ops.testing``, a fresh charm per hook.
"""

from __future__ import annotations

import base64
import datetime

from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from tests.juju.model import APP, Deployment, FakeCluster

from aitenant_charm import pki, webhook_trust
from aitenant_charm.cluster_manifests import cluster_scoped_name, construct_webhook_configuration
from aitenant_charm.internal_ca import INTERNAL_CA_LABEL
from aitenant_charm.workload import WEBHOOK_PORT

NOW = datetime.datetime.now(datetime.UTC)
VWC_NAME = cluster_scoped_name(APP, "maas")


def three_units() -> tuple[FakeCluster, Deployment]:
    cluster = FakeCluster()
    deployment = Deployment(cluster, units=3)
    deployment.relate_gateway()
    deployment.relate_maas_api()
    deployment.settle()
    return cluster, deployment


def published_cas(cluster: FakeCluster) -> set[str]:
    """Fingerprints of the CAs the webhook configuration in the cluster trusts."""
    vwc = cluster.get(ValidatingWebhookConfiguration, VWC_NAME)
    pem = base64.b64decode(vwc.webhooks[0].clientConfig.caBundle).decode()
    return set(pki.der_sha256_fingerprints(pem))


def internal_ca(deployment: Deployment) -> str:
    secret = next(s for s in deployment.secrets.values() if s.label == INTERNAL_CA_LABEL)
    return secret.latest_content[pki.CA_CERT]


def switch_from_another_ca(cluster: FakeCluster, deployment: Deployment) -> pki.KeyPair:
    """The state right after the `certificates` relation went away: caBundle and every
    controller still hold the provider's CA and certificate; the charm's are the internal
    CA's. Each unit has said so on the peer relation."""
    provider = pki.generate_ca("provider CA", now=NOW)
    leaf = pki.issue_server_certificate(
        provider, dns_names=pki.service_dns_names(APP, "maas"), now=NOW
    )
    vwc = construct_webhook_configuration(
        name=VWC_NAME,
        ca_bundle_pem=provider.cert_pem.encode(),
        service_name=APP,
        service_namespace="maas",
        port=WEBHOOK_PORT,
    )
    cluster.client("maas").apply(vwc)
    for unit in deployment.units:
        unit.workload.reloads = False
        unit.workload.pinned = leaf.cert_pem
    for unit in deployment.units[1:]:
        deployment.run(unit, lambda ctx, s: ctx.on.update_status())
    return provider


def peer_relation_changed(deployment: Deployment, unit: int, remote: int) -> None:
    assert deployment.peers is not None
    peers = deployment.peers.id
    deployment.run(
        unit, lambda ctx, s: ctx.on.relation_changed(s.get_relation(peers), remote_unit=remote)
    )


def test_old_ca_stays_until_every_unit_serves_the_new_certificate():
    cluster, deployment = three_units()
    provider = switch_from_another_ca(cluster, deployment)
    new, old = (
        pki.der_sha256_fingerprint(internal_ca(deployment)),
        pki.der_sha256_fingerprint(provider.cert_pem),
    )
    # WHEN the leader reconciles while every controller serves the provider's certificate
    deployment.run(0, lambda ctx, s: ctx.on.update_status())
    # THEN caBundle holds both CAs
    assert published_cas(cluster) == {new, old}
    # WHEN the leader's own controller reloads
    deployment.units[0].workload.reload()
    deployment.run(0, lambda ctx, s: ctx.on.update_status())
    # THEN both stay: two units still serve the provider's certificate
    assert published_cas(cluster) == {new, old}
    # WHEN unit 1 reloads and publishes, and the leader hears of it
    deployment.units[1].workload.reload()
    deployment.run(1, lambda ctx, s: ctx.on.update_status())
    peer_relation_changed(deployment, 0, remote=1)
    # THEN both stay: unit 2 still serves the old one
    assert published_cas(cluster) == {new, old}
    # WHEN the last unit reloads and publishes
    deployment.units[2].workload.reload()
    deployment.run(2, lambda ctx, s: ctx.on.update_status())
    peer_relation_changed(deployment, 0, remote=2)
    # THEN the old CA is dropped
    assert published_cas(cluster) == {new}


def test_units_publish_what_their_controller_serves_not_what_the_charm_wrote():
    cluster, deployment = three_units()
    provider = switch_from_another_ca(cluster, deployment)
    assert deployment.peers is not None
    # GIVEN unit 1 whose controller has not reloaded the files the charm wrote
    unit = deployment.units[1]
    served = unit.workload.serves()
    written = (unit.workload.root / "webhook" / "tls.crt").read_text()
    assert served is not None
    assert not pki.same_certificate(served, written)
    # WHEN it publishes
    deployment.run(1, lambda ctx, s: ctx.on.update_status())
    # THEN its databag names the served certificate, and no CA of the new bundle for it
    bag = deployment.peers.unit_data[1]
    assert bag[webhook_trust.SERVED_CERT] == pki.der_sha256_fingerprint(served)
    assert bag.get(webhook_trust.SERVED_CA, "") == ""  # ops drops a key set to ""
    assert pki.issued_by(served, provider.cert_pem)


def test_a_planned_unit_not_yet_on_the_peer_relation_keeps_the_old_ca():
    cluster, deployment = three_units()
    provider = switch_from_another_ca(cluster, deployment)
    for unit in deployment.units:
        unit.workload.reload()
    for unit in (1, 2):
        deployment.run(unit, lambda ctx, s: ctx.on.update_status())
    # GIVEN a fourth unit Juju plans, which has not joined the peer relation yet
    deployment.planned_units = 4
    # WHEN the leader reconciles, every unit it knows serving the new certificate
    deployment.run(0, lambda ctx, s: ctx.on.update_status())
    # THEN the old CA stays
    assert pki.der_sha256_fingerprint(provider.cert_pem) in published_cas(cluster)
    # AND once the application is back to the three units, it goes
    deployment.planned_units = None
    deployment.run(0, lambda ctx, s: ctx.on.update_status())
    assert published_cas(cluster) == {pki.der_sha256_fingerprint(internal_ca(deployment))}


def test_the_leader_publishes_the_cas_it_trusts_for_its_peers():
    _, deployment = three_units()
    assert deployment.peers is not None
    # THEN the peers see which CAs the leader's bundle holds (a change wakes them up)
    trusted = deployment.peers.app_data[webhook_trust.TRUSTED_CAS]
    assert trusted == pki.der_sha256_fingerprint(internal_ca(deployment))
    # AND every unit published the certificate it serves, from that CA
    for unit in deployment.units:
        assert deployment.peers.unit_data[unit.id][webhook_trust.SERVED_CA] == trusted
