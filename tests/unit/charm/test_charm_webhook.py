"""The validating webhook: its configuration, certificate and the NetworkPolicy on its port.

The ValidatingWebhookConfiguration calls the app's Service with the CA that issued the served
certificate, whether the internal CA or a `certificates` provider; a renewed certificate does
not restart the controller; removing the relation falls back to the internal CA; the webhook
port admits only the API server's addresses.
"""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any
from unittest.mock import MagicMock

from charmlibs.interfaces.tls_certificates import Certificate, CertificateSigningRequest, PrivateKey
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.resources.networking_v1 import NetworkPolicy
from tests.juju.kit import APP, MODEL, CharmKit
from tests.unit.charm.cluster_objects import OURS

import charm
from aitenant import contract
from aitenant_charm import pki
from aitenant_charm.internal_ca import INTERNAL_CA_LABEL, WEBHOOK_CERT_LABEL
from aitenant_charm.workload import SERVICE, WEBHOOK_CERT_DIR


def _webhook(kit: CharmKit) -> ValidatingWebhookConfiguration:
    applied = kit.applied(ValidatingWebhookConfiguration)
    assert applied, "no ValidatingWebhookConfiguration was applied"
    return applied[-1]


def _ca_bundle(webhook: ValidatingWebhookConfiguration) -> str:
    assert webhook.webhooks
    bundle = webhook.webhooks[0].clientConfig.caBundle
    assert bundle
    return base64.b64decode(bundle).decode()


def test_webhook_port_is_opened(ready: CharmKit):
    # GIVEN a reconciled unit
    # WHEN we look at its opened ports
    # THEN the webhook port is open on the app's Service
    assert {port.port for port in ready.state.opened_ports} == {9443}


def test_webhook_configuration_points_at_the_app_service_with_the_ca(ready: CharmKit):
    # GIVEN a leader with the fallback (internal CA) webhook certificate
    ca = ready.secret(INTERNAL_CA_LABEL)["ca-cert"]
    # WHEN we look at the applied ValidatingWebhookConfiguration
    webhook = _webhook(ready)
    assert webhook.webhooks
    # (one webhook: the singleton kinds' names are the CRDs' CEL rules)
    [hook] = webhook.webhooks
    # THEN it calls the app's Service on 9443 at the AITenant path and trusts the CA
    assert webhook.metadata
    assert webhook.metadata.name == OURS
    assert hook.name == contract.WEBHOOK_NAME
    service = hook.clientConfig.service
    assert service is not None
    assert (service.name, service.namespace, service.port) == (APP, MODEL, 9443)
    assert service.path == contract.WEBHOOK_PATH
    assert ca in _ca_bundle(webhook)
    # AND the served certificate chains to that CA and names the Service
    served = ready.read(f"{WEBHOOK_CERT_DIR}/tls.crt")
    assert pki.issued_by(served, ca)
    assert f"{APP}.{MODEL}.svc" in pki.dns_names(served)


def test_webhook_certificate_from_the_certificates_relation(kit: CharmKit):
    # GIVEN a certificates relation and a provider CA
    now = datetime.datetime.now(datetime.UTC)
    provider_ca = pki.generate_ca("provider CA", now=now)
    relation_id = kit.relate(charm.CERTIFICATES_RELATION, "self-signed-certificates", units={0: {}})
    kit.make_ready()
    # WHEN the provider signs the unit's request and publishes it
    requests = kit.relation(relation_id).local_unit_data
    csr_pem = _first_csr(requests["certificate_signing_requests"])
    csr = CertificateSigningRequest.from_string(csr_pem)
    signed = csr.sign(
        ca=Certificate.from_string(provider_ca.cert_pem),
        ca_private_key=PrivateKey.from_string(provider_ca.key_pem),
        validity=datetime.timedelta(days=30),
    )
    provided = {
        "ca": provider_ca.cert_pem,
        "certificate_signing_request": csr_pem,
        "certificate": str(signed),
        "chain": [str(signed), provider_ca.cert_pem],
    }
    kit.update_relation_data(relation_id, app_data={"certificates": json.dumps([provided])})
    kit.reconcile()
    # THEN the workload serves the provided certificate and the webhook trusts the provider CA
    assert kit.read(f"{WEBHOOK_CERT_DIR}/tls.crt").strip() == str(signed).strip()
    assert _ca_bundle(_webhook(kit)).strip() == provider_ca.cert_pem.strip()
    assert SERVICE in kit.plan().services


def test_renewed_webhook_certificate_does_not_restart_the_controller(ready: CharmKit):
    # GIVEN a running controller and its webhook certificate
    command = ready.service().command
    env = dict(ready.service().environment)
    old = ready.read(f"{WEBHOOK_CERT_DIR}/tls.crt")
    # WHEN the fallback certificate is replaced (as renewal does)
    ready.set_secret_content(WEBHOOK_CERT_LABEL, {"tls-cert": "renew-me", "tls-key": "renew-me"})
    ready.reconcile()
    # THEN the new certificate file is in place but the service definition is unchanged
    new = ready.read(f"{WEBHOOK_CERT_DIR}/tls.crt")
    assert new != old
    assert pki.issued_by(new, ready.secret(INTERNAL_CA_LABEL)["ca-cert"])
    assert ready.service().command == command
    assert dict(ready.service().environment) == env


def _first_csr(raw: str) -> str:
    return json.loads(raw)[0]["certificate_signing_request"]


def test_removing_the_certificates_relation_falls_back_to_the_internal_ca(kit: CharmKit):
    # GIVEN a certificates relation that never issued a certificate
    relation_id = kit.relate(charm.CERTIFICATES_RELATION, "self-signed-certificates")
    kit.make_ready()
    assert SERVICE not in kit.plan().services
    # WHEN the relation is removed
    kit.remove_relation(relation_id)
    # THEN the leader issues the webhook certificate from its CA and the controller starts
    ca = kit.secret(INTERNAL_CA_LABEL)["ca-cert"]
    assert pki.issued_by(kit.read(f"{WEBHOOK_CERT_DIR}/tls.crt"), ca)
    assert ca in _ca_bundle(_webhook(kit))
    assert SERVICE in kit.plan().services


def _api_server_at(kube: MagicMock, *addresses: str) -> None:
    """The EndpointSlice of Service default/kubernetes lists ``addresses``."""
    slice_ = EndpointSlice.from_dict(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default"},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [address]} for address in addresses],
        }
    )

    def listing(kind: Any, *args: Any, **kwargs: Any) -> Any:
        if kind is EndpointSlice:
            assert kwargs == {
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "kubernetes"},
            }
            return iter([slice_])
        return iter([])

    kube.list.side_effect = listing


def _policy(kit: CharmKit) -> dict[str, Any]:
    applied = kit.applied(NetworkPolicy)
    assert applied, "no NetworkPolicy was applied"
    return applied[-1].to_dict()


def test_webhook_port_admits_only_the_api_server(kit: CharmKit):
    # GIVEN an API server on two addresses
    _api_server_at(kit.kube, "10.0.0.2", "10.0.0.3")
    # WHEN the leader reconciles
    kit.make_ready()
    # THEN the app's pods admit the webhook port from those addresses only
    policy = _policy(kit)
    assert policy["metadata"]["name"] == f"{APP}-webhook"
    assert policy["metadata"]["namespace"] == MODEL
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": APP}}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    webhook, others = policy["spec"]["ingress"]
    assert webhook == {
        "from": [{"ipBlock": {"cidr": "10.0.0.2/32"}}, {"ipBlock": {"cidr": "10.0.0.3/32"}}],
        "ports": [{"port": 9443, "protocol": "TCP"}],
    }
    # and health and metrics from anywhere (kubelet, Prometheus); nothing else is admitted
    assert others == {
        "ports": [{"port": 8080, "protocol": "TCP"}, {"port": 8081, "protocol": "TCP"}]
    }


def test_without_a_known_api_server_the_webhook_port_stays_open(kit: CharmKit):
    # GIVEN no EndpointSlice for Service default/kubernetes
    # WHEN the leader reconciles
    kit.make_ready()
    # THEN the webhook rule has no peers (all sources): admitting nobody would refuse every write
    webhook = _policy(kit)["spec"]["ingress"][0]
    assert "from" not in webhook
    assert webhook["ports"] == [{"port": 9443, "protocol": "TCP"}]
