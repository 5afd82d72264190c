"""Cluster objects: CRDs, RBAC and the webhook configuration, and what removal leaves alone."""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any, cast
from unittest.mock import MagicMock

import ops
import pytest
from charmlibs.interfaces.tls_certificates import Certificate, CertificateSigningRequest, PrivateKey
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef
from lightkube.resources.admissionregistration_v1 import (
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
)
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.resources.networking_v1 import NetworkPolicy
from lightkube.resources.rbac_authorization_v1 import (
    ClusterRole,
    ClusterRoleBinding,
    Role,
    RoleBinding,
)
from tests.juju.kit import APP, DEFAULT_MAAS_API, MODEL, CharmKit, api_error

import charm
from aitenant import contract
from aitenant_charm import pki
from aitenant_charm.cluster_manifests import (
    CHARM_LABELS,
    CONTROLLER_CLUSTER_ROLE,
    MANAGED_BY_LABEL,
    load_crds,
)
from aitenant_charm.internal_ca import INTERNAL_CA_LABEL, WEBHOOK_CERT_LABEL
from aitenant_charm.workload import SERVICE, WEBHOOK_CERT_DIR

SHIPPED_CRDS = load_crds()
# The name of the deployment's cluster-scoped objects (never Juju's `<model>-<app>`).
OURS = f"aitenant.{MODEL}.{APP}"


def _webhook(kit: CharmKit) -> ValidatingWebhookConfiguration:
    applied = kit.applied(ValidatingWebhookConfiguration)
    assert applied, "no ValidatingWebhookConfiguration was applied"
    return applied[-1]


def _ca_bundle(webhook: ValidatingWebhookConfiguration) -> str:
    assert webhook.webhooks
    bundle = webhook.webhooks[0].clientConfig.caBundle
    assert bundle
    return base64.b64decode(bundle).decode()


def test_client_uses_the_charm_field_manager(ready: CharmKit):
    # GIVEN a reconciled deployment
    # WHEN we look at how the lightkube Client was built
    client_class = cast(MagicMock, charm.Client)
    # THEN server-side apply writes as `aitenant-k8s`
    assert client_class.call_args.kwargs == {"field_manager": "aitenant-k8s"}


def test_leader_applies_the_shipped_crds_with_force(ready: CharmKit):
    # GIVEN the CRDs in the aitenant package
    assert SHIPPED_CRDS, "aitenant/manifests/crds is empty"
    # WHEN the leader reconciles
    # THEN every shipped CRD was server-side applied, taking ownership of conflicting fields
    applied = {crd.metadata.name for crd in ready.applied(CustomResourceDefinition) if crd.metadata}
    assert applied == {crd.metadata.name for crd in SHIPPED_CRDS if crd.metadata}
    assert "aitenants.maas.opendatahub.io" in applied
    for call in ready.kube.apply.call_args_list:
        assert call.kwargs.get("force") is True


def test_controller_cluster_role_is_bound_to_the_app_service_account(ready: CharmKit):
    # GIVEN a reconciled leader
    # WHEN we look at the RBAC objects applied
    roles = {role.metadata.name for role in ready.applied(ClusterRole) if role.metadata}
    bindings = ready.applied(ClusterRoleBinding)
    assert {b.metadata.name for b in bindings if b.metadata} == {OURS}
    binding = bindings[-1]
    # THEN the controller's ClusterRole is applied and bound to `<app>` in the model namespace
    assert CONTROLLER_CLUSTER_ROLE in roles
    assert binding.roleRef.name == CONTROLLER_CLUSTER_ROLE
    assert binding.roleRef.kind == "ClusterRole"
    assert binding.subjects
    [subject] = binding.subjects
    assert (subject.kind, subject.name, subject.namespace) == ("ServiceAccount", APP, MODEL)


def test_cluster_role_binding_writes_are_limited_to_the_app_service_account_s_maas_api_ones(
    ready: CharmKit,
):
    # GIVEN a reconciled leader
    # WHEN we look at the admission policy applied
    policy = ready.applied(ValidatingAdmissionPolicy)[-1]
    binding = ready.applied(ValidatingAdmissionPolicyBinding)[-1]
    # THEN it is named like our other cluster-scoped objects, matches the app's service account
    # only, and the binding denies what it refuses
    assert policy.metadata
    assert policy.metadata.name == OURS
    assert policy.metadata.labels == CHARM_LABELS
    assert policy.spec
    [condition] = policy.spec.matchConditions or []
    assert f'"system:serviceaccount:{MODEL}:{APP}"' in condition.expression
    assert binding.spec
    assert binding.spec.policyName == OURS
    assert binding.spec.validationActions == ["Deny"]


def test_non_leader_applies_nothing(kit: CharmKit):
    # GIVEN a non-leader unit
    kit.set_leader(False)
    # WHEN it reconciles
    kit.make_ready()
    # THEN cluster objects are the leader's job
    kit.kube.apply.assert_not_called()


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


def test_remove_of_the_application_deletes_only_the_webhook_binding_and_policy(
    ready: CharmKit,
):
    # GIVEN a deployed application that is being removed entirely
    ready.replace(planned_units=0)
    # WHEN the remove hook runs
    ready.emit("remove")
    # THEN the webhook configuration, binding, admission policy and pods' policy go, CRDs and
    # ClusterRoles never do
    deleted = [call.args for call in ready.kube.delete.call_args_list]
    assert deleted == [
        (ValidatingWebhookConfiguration, OURS),
        (ClusterRoleBinding, OURS),
        (ValidatingAdmissionPolicyBinding, OURS),
        (ValidatingAdmissionPolicy, OURS),
        (NetworkPolicy, f"{APP}-webhook"),
    ]
    for kind, _ in deleted:
        assert kind is not CustomResourceDefinition
        assert kind is not ClusterRole
    ready.kube.deletecollection.assert_not_called()


def test_removing_one_unit_deletes_nothing(ready: CharmKit):
    # GIVEN an application that keeps other units
    ready.replace(planned_units=2)
    # WHEN one unit's remove hook runs
    ready.emit("remove")
    # THEN nothing is deleted
    ready.kube.delete.assert_not_called()


def test_remove_tolerates_objects_already_gone(ready: CharmKit):
    # GIVEN objects that were already deleted
    ready.replace(planned_units=0)
    ready.kube.delete.side_effect = api_error(404, "not found")
    # WHEN the remove hook runs
    ready.emit("remove")
    # THEN it finishes without error, having tried each
    assert ready.kube.delete.call_count == 5


@pytest.mark.parametrize("event", ["upgrade_charm", "config_changed", "update_status"])
def test_crds_reapplied_never_deleted_on_other_events(ready: CharmKit, event: str):
    # GIVEN a reconciled leader
    ready.kube.apply.reset_mock()
    # WHEN another lifecycle event arrives
    ready.emit(event)
    # THEN the CRDs are applied again (idempotent) and nothing is deleted
    assert len(ready.applied(CustomResourceDefinition)) == len(SHIPPED_CRDS)
    ready.kube.delete.assert_not_called()


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


# --- CRDs for the API server's version, and the namespaced Roles -----------------------------


def _has_cel(crds: list[CustomResourceDefinition]) -> bool:
    return "x-kubernetes-validations" in json.dumps([crd.to_dict() for crd in crds])


def test_crds_keep_their_cel_rules(kit: CharmKit):
    # GIVEN a supported API server (1.37, the fake's default)
    # WHEN the leader reconciles
    kit.make_ready()
    # THEN the CRDs are applied with their CEL rules (every supported server evaluates them)
    assert _has_cel(kit.applied(CustomResourceDefinition))


def test_an_api_server_older_than_1_32_blocks_and_nothing_is_written(kit: CharmKit):
    # GIVEN a 1.31 API server
    kit.private.version.return_value = {"major": "1", "minor": "31", "gitVersion": "v1.31.9"}
    # WHEN the leader reconciles with everything related
    kit.make_ready()
    # THEN it is blocked with the one line naming both versions
    assert kit.status() == ops.BlockedStatus(
        "the API server runs Kubernetes v1.31.9; aitenant-k8s needs 1.32 or later"
    )
    # AND it wrote nothing to the cluster and planned no controller
    kit.kube.apply.assert_not_called()
    kit.kube.patch.assert_not_called()
    kit.kube.delete.assert_not_called()
    assert SERVICE not in kit.plan().services


def _where(objects: list[Role | RoleBinding]) -> set[tuple[str, str | None, str | None]]:
    return {
        (type(obj).__name__, obj.metadata.namespace, obj.metadata.name)
        for obj in objects
        if obj.metadata
    }


PREFIX = OURS
AITENANT_NS = contract.DEFAULT_AITENANT_NAMESPACE
GATEWAY_NS = "istio-gw"  # CharmKit.integrate_gateway's


def test_the_gateway_role_follows_the_gateway_namespace_option(ready: CharmKit):
    # GIVEN the gateway Role in the namespace the `gateway` relation named
    stored = {
        Role: [_stored(Role, GATEWAY_NS, f"{PREFIX}-gateway")],
        RoleBinding: [_stored(RoleBinding, GATEWAY_NS, f"{PREFIX}-gateway")],
    }
    ready.kube.list.side_effect = lambda kind, *a, **kw: iter(stored.get(kind, []))  # pyright: ignore[reportUnknownLambdaType]
    ready.kube.apply.reset_mock()
    # WHEN the operator sets another gateway namespace (config wins over the relation)
    ready.configure(gateway_namespace="other-gw")
    # THEN the Role is applied there and ours in the relation's namespace are deleted
    assert ("Role", "other-gw", f"{PREFIX}-gateway") in _where(ready.applied(Role))
    deleted = {
        (c.args[0].__name__, c.kwargs.get("namespace"), c.args[1])
        for c in ready.kube.delete.call_args_list
    }
    assert deleted == {
        ("Role", GATEWAY_NS, f"{PREFIX}-gateway"),
        ("RoleBinding", GATEWAY_NS, f"{PREFIX}-gateway"),
    }
    assert ready.flags()["gateway-namespace"] == "other-gw"


def test_no_gateway_role_while_no_gateway_is_known(kit: CharmKit):
    # GIVEN maas-api but neither the `gateway` relation nor gateway config
    kit.integrate_maas_api()
    kit.reconcile()
    # THEN the other Roles are applied, no gateway Role (and none is deleted)
    names = {name for _, _, name in _where(kit.applied(Role))}
    assert f"{PREFIX}-claims" in names
    assert f"{PREFIX}-gateway" not in names
    kit.kube.delete.assert_not_called()


def test_missing_gateway_namespace_waits_and_names_it(ready: CharmKit):
    def apply(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if obj.metadata and obj.metadata.namespace == "nowhere":
            raise api_error(404, 'namespaces "nowhere" not found')
        return obj

    ready.kube.apply.side_effect = apply
    ready.configure(gateway_namespace="nowhere")
    status = ready.status()
    assert isinstance(status, ops.WaitingStatus)
    assert "gateway namespace 'nowhere' does not exist" in status.message


def test_the_aitenant_namespace_is_created_before_its_role(kit: CharmKit):
    # GIVEN a cluster without the AITenant namespace (the controller has never started)
    order: list[str] = []
    kit.kube.create.side_effect = lambda obj, *a, **kw: order.append(f"create {obj.metadata.name}")  # pyright: ignore[reportUnknownLambdaType]

    def apply(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(obj, Role) and obj.metadata and obj.metadata.namespace == AITENANT_NS:
            order.append("apply claims Role")
        return obj

    kit.kube.apply.side_effect = apply
    # WHEN the leader reconciles
    kit.make_ready()
    # THEN the charm creates the namespace, labelled as the controller creates it, then the Role
    assert order[:2] == [f"create {AITENANT_NS}", "apply claims Role"]
    created = kit.kube.create.call_args_list[0].args[0]
    assert isinstance(created, Namespace)
    assert created.metadata
    assert created.metadata.labels == contract.MANAGED_NAMESPACE_LABELS


def test_an_existing_aitenant_namespace_is_left_alone(kit: CharmKit):
    # GIVEN the AITenant namespace exists
    def get(kind: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        if kind is Namespace:
            return Namespace(metadata=ObjectMeta(name=name))
        raise api_error(404, "not found")

    kit.kube.get.side_effect = get
    # WHEN the leader reconciles
    kit.make_ready()
    # THEN nothing is created, the claims Role is applied there
    kit.kube.create.assert_not_called()
    assert ("Role", AITENANT_NS, f"{PREFIX}-claims") in _where(kit.applied(Role))


def test_changing_aitenant_namespace_moves_the_claims_role_and_deletes_the_old_one(
    ready: CharmKit,
):
    # GIVEN the claims Role and binding in the old AITenant namespace
    stored = {
        Role: [
            _stored(Role, AITENANT_NS, f"{PREFIX}-claims"),
            _stored(Role, "maas-infra", f"{PREFIX}-platform"),
        ],
        RoleBinding: [_stored(RoleBinding, AITENANT_NS, f"{PREFIX}-claims")],
    }
    ready.kube.list.side_effect = lambda kind, *a, **kw: iter(stored.get(kind, []))  # pyright: ignore[reportUnknownLambdaType]
    ready.kube.apply.reset_mock()
    # WHEN the operator points the controller at another AITenant namespace
    ready.configure(aitenant_namespace="other-tenants")
    # THEN the claims Role is applied there, and ours in the old namespace are deleted
    assert ("Role", "other-tenants", f"{PREFIX}-claims") in _where(ready.applied(Role))
    deleted = {
        (c.args[0].__name__, c.kwargs.get("namespace"), c.args[1])
        for c in ready.kube.delete.call_args_list
    }
    assert deleted == {
        ("Role", AITENANT_NS, f"{PREFIX}-claims"),
        ("RoleBinding", AITENANT_NS, f"{PREFIX}-claims"),
    }
    assert ready.flags()["aitenant-namespace"] == "other-tenants"


def test_lease_role_in_the_model_and_platform_role_in_the_infra_namespace(ready: CharmKit):
    # GIVEN maas-api says its infra namespace is maas-infra
    # WHEN the leader reconciles
    ready.kube.apply.reset_mock()
    ready.reconcile()
    roles = ready.applied(Role)
    bindings = ready.applied(RoleBinding)
    # THEN the Lease Role lives in the model's namespace, the platform Role in maas-infra, the
    # claims Role in the AITenant namespace
    assert _where(roles) == {
        ("Role", MODEL, f"{PREFIX}-leader-election"),
        ("Role", "maas-infra", f"{PREFIX}-platform"),
        ("Role", AITENANT_NS, f"{PREFIX}-claims"),
        ("Role", GATEWAY_NS, f"{PREFIX}-gateway"),
    }
    assert _where(bindings) == {
        ("RoleBinding", MODEL, f"{PREFIX}-leader-election"),
        ("RoleBinding", "maas-infra", f"{PREFIX}-platform"),
        ("RoleBinding", AITENANT_NS, f"{PREFIX}-claims"),
        ("RoleBinding", GATEWAY_NS, f"{PREFIX}-gateway"),
    }
    for binding in bindings:
        assert binding.subjects
        [subject] = binding.subjects
        assert (subject.kind, subject.name, subject.namespace) == ("ServiceAccount", APP, MODEL)
        assert binding.metadata
        assert binding.metadata.labels == CHARM_LABELS
    # AND the controller's ClusterRole no longer grants Leases or Secrets anywhere
    [controller_role] = [
        r
        for r in ready.applied(ClusterRole)
        if r.metadata and r.metadata.name == "aitenant-controller"
    ]
    resources = {res for rule in controller_role.rules or [] for res in rule.resources or []}
    assert not {"leases", "secrets", "configmaps", "authpolicies"} & resources


def test_without_an_infra_namespace_the_platform_role_is_in_the_model(kit: CharmKit):
    # GIVEN maas-api that names no infra namespace: the controller defaults to its own
    kit.integrate_gateway()
    kit.integrate_maas_api(DEFAULT_MAAS_API.model_copy(update={"infra_namespace": ""}))
    kit.reconcile()
    # THEN the Lease and platform Roles are in the model's namespace
    names = (f"{PREFIX}-leader-election", f"{PREFIX}-platform")
    assert {ns for _, ns, name in _where(kit.applied(Role)) if name in names} == {MODEL}


def _stored(kind: type, namespace: str, name: str, managed: bool = True) -> Role | RoleBinding:
    labels = dict(MANAGED_BY_LABEL) if managed else {}
    metadata = ObjectMeta(name=name, namespace=namespace, labels=labels)
    if kind is RoleBinding:
        ref = RoleRef(apiGroup="rbac.authorization.k8s.io", kind="Role", name=name)
        return RoleBinding(metadata=metadata, roleRef=ref)
    return Role(metadata=metadata)


def test_changing_infra_namespace_moves_the_platform_role_and_deletes_the_old_one(
    ready: CharmKit,
):
    # GIVEN the platform Role and binding in the old infra namespace, and a user's Role there
    stored = {
        Role: [
            _stored(Role, "maas-infra", f"{PREFIX}-platform"),
            _stored(Role, MODEL, f"{PREFIX}-leader-election"),
            _stored(Role, "maas-infra", "someone-elses", managed=True),
        ],
        RoleBinding: [_stored(RoleBinding, "maas-infra", f"{PREFIX}-platform")],
    }
    ready.kube.list.side_effect = lambda kind, *a, **kw: iter(stored.get(kind, []))  # pyright: ignore[reportUnknownLambdaType]
    ready.kube.apply.reset_mock()
    # WHEN the operator points the controller at another infra namespace
    ready.configure(infra_namespace="tenant-infra")
    # THEN the platform Role is applied there, and only ours in the old namespace are deleted
    assert ("Role", "tenant-infra", f"{PREFIX}-platform") in _where(ready.applied(Role))
    deleted = {
        (c.args[0].__name__, c.kwargs.get("namespace"), c.args[1])
        for c in ready.kube.delete.call_args_list
    }
    assert deleted == {
        ("Role", "maas-infra", f"{PREFIX}-platform"),
        ("RoleBinding", "maas-infra", f"{PREFIX}-platform"),
    }
    # AND the controller is told the new namespace
    assert ready.flags()["infra-namespace"] == "tenant-infra"


def test_missing_infra_namespace_waits_and_names_it(ready: CharmKit):
    # GIVEN an infra namespace that does not exist
    def apply(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if obj.metadata and obj.metadata.namespace == "nowhere":
            raise api_error(404, 'namespaces "nowhere" not found')
        return obj

    ready.kube.apply.side_effect = apply
    # WHEN the operator sets it
    ready.configure(infra_namespace="nowhere")
    # THEN the unit waits and says what to do
    status = ready.status()
    assert isinstance(status, ops.WaitingStatus)
    assert "infra namespace 'nowhere' does not exist" in status.message
    assert "`infra-namespace`" in status.message


def test_remove_deletes_our_roles_everywhere(ready: CharmKit):
    stored = {
        Role: [
            _stored(Role, "maas-infra", f"{PREFIX}-platform"),
            _stored(Role, AITENANT_NS, f"{PREFIX}-claims"),
            _stored(Role, "x", "other"),
        ],
        RoleBinding: [_stored(RoleBinding, MODEL, f"{PREFIX}-leader-election")],
    }
    ready.kube.list.side_effect = lambda kind, *a, **kw: iter(stored.get(kind, []))  # pyright: ignore[reportUnknownLambdaType]
    ready.replace(planned_units=0)
    ready.emit("remove")
    deleted = {
        (c.args[0].__name__, c.kwargs.get("namespace"), c.args[1])
        for c in ready.kube.delete.call_args_list
        if c.args[0] in (Role, RoleBinding)
    }
    assert deleted == {
        ("Role", "maas-infra", f"{PREFIX}-platform"),
        ("Role", AITENANT_NS, f"{PREFIX}-claims"),
        ("RoleBinding", MODEL, f"{PREFIX}-leader-election"),
    }


# --- the webhook port's NetworkPolicy -------------------------------------------------------


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


def test_everything_the_charm_writes_is_kept_by_juju(ready: CharmKit):
    # GIVEN a healthy deployment that reconciled (and created the AITenant namespace)
    # THEN every object it applied or created carries the label Juju's model webhook skips,
    # so `juju remove-application` leaves it to the charm (README.md, "Removing the charm")
    written = [
        call.args[0]
        for call in [*ready.kube.apply.call_args_list, *ready.kube.create.call_args_list]
    ]
    kinds = {type(obj).__name__ for obj in written}
    assert {"CustomResourceDefinition", "ClusterRole", "Namespace", "Role"} <= kinds
    unlabelled = [
        f"{type(obj).__name__} {obj.metadata.name}"
        for obj in written
        if not (obj.metadata.labels or {}).items() >= contract.KEPT_BY_JUJU_LABELS.items()
    ]
    assert unlabelled == []
