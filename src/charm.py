#!/usr/bin/env python3
"""Juju sidecar charm that runs the AITenant controller under Pebble.

Every event that matters goes to one level-based ``_reconcile``, an ordered list of named
steps; only the collect-status handler decides the unit's status. Each concern lives in a
module of ``aitenant_charm`` (its ``__init__`` lists them); this file wires events to them.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass
from typing import Final

import ops
from charmlibs.interfaces.gateway_metadata import GatewayMetadataRequirer
from charmlibs.interfaces.tls_certificates import (
    CertificateRequestAttributes,
    Mode,
    TLSCertificatesRequiresV4,
)
from lightkube import Client
from lightkube.core.exceptions import ApiError
from pydantic import ValidationError

from aitenant_charm import (
    api_server_writes,
    cluster_manifests,
    cos,
    internal_ca,
    pebble_layer,
    pki,
    removal,
    status,
    webhook_trust,
    workload,
)
from aitenant_charm.api_server_reads import ClusterFacts, count_tenants, read_cluster_facts
from aitenant_charm.config import CharmConfig
from aitenant_charm.flags import (
    GatewayFacts,
    infra_namespace_of,
    maas_api_refusal,
    resolve_gateway,
)
from aitenant_charm.webhook_trust import PEERS_RELATION, WebhookTLS
from aitenant_charm.workload import CONTAINER, HEALTH_PORT, METRICS_PORT
from charms.aitenant_k8s.v0.maas_api import MaasApiAppData, MaasApiRequirer

logger = logging.getLogger(__name__)

# Relation endpoints and the action, as declared in metadata.yaml and charmcraft.yaml; the
# container, ports and files are in aitenant_charm.workload.
GATEWAY_RELATION: Final = "gateway"
MAAS_API_RELATION: Final = "maas-api"
CERTIFICATES_RELATION: Final = "certificates"
METRICS_RELATION: Final = "metrics-endpoint"
DASHBOARD_RELATION: Final = "grafana-dashboard"
LOGGING_RELATION: Final = "logging"
PREPARE_REMOVAL_ACTION: Final = "prepare-removal"
# Server-side apply owner of everything the charm writes to the cluster (never the
# controller's own field manager, so the two never fight over fields).
FIELD_MANAGER: Final = "aitenant-k8s"


class _Stop(Exception):
    """A reconcile step's guard: the rest of the steps wait for the next event; the message
    (logged at ``level``) says why."""

    def __init__(self, message: str, level: int = logging.INFO) -> None:
        super().__init__(message)
        self.level = level


@dataclass(frozen=True)
class _ClusterWritten:
    """What the cluster-writing steps leave for the workload steps of the same reconcile."""

    ca: pki.KeyPair | None  # the internal CA; None before the leader created it
    tls: WebhookTLS | None  # the webhook certificate to serve; None until issued
    # caBundle still trusts an old CA (leader): the workload step checks whether every unit
    # serves the new certificate yet, to drop it.
    overlapping: bool


class AITenantCharm(ops.CharmBase):
    """Deploy and configure the AITenant controller; wire it to MaaS API and the gateway."""

    _stored = ops.StoredState()

    def __init__(self, framework: ops.Framework):
        super().__init__(framework)
        # cluster_error: why the last attempt to apply the cluster objects failed ("" when
        # it succeeded); a fact every later hook's status can read.
        self._stored.set_default(removal_prepared=False, cluster_error="")
        self._client: Client | None = None
        # What the cluster said, read by the first handler that needs it (see _cluster_facts).
        self._facts: ClusterFacts | None = None

        self.gateway = GatewayMetadataRequirer(self, relation_name=GATEWAY_RELATION)
        self.maas_api = MaasApiRequirer(self, relation_name=MAAS_API_RELATION)
        names = self._service_dns_names()
        self._cert_request = CertificateRequestAttributes(common_name=names[0][:64], sans_dns=names)
        self.certificates = TLSCertificatesRequiresV4(
            self, CERTIFICATES_RELATION, certificate_requests=[self._cert_request], mode=Mode.UNIT
        )

        for event in (
            self.on.config_changed,
            self.on.start,
            self.on.upgrade_charm,
            self.on.update_status,
            self.on.leader_elected,
            self.on.secret_changed,
            self.on[CONTAINER].pebble_ready,
            self.on[CONTAINER].pebble_check_failed,
            self.on[CONTAINER].pebble_check_recovered,
            self.on[GATEWAY_RELATION].relation_changed,
            self.on[GATEWAY_RELATION].relation_broken,
            self.on[CERTIFICATES_RELATION].relation_broken,
            self.maas_api.on.maas_api_changed,
            self.maas_api.on.maas_api_broken,
            self.certificates.on.certificate_available,
            self.on[METRICS_RELATION].relation_joined,
            self.on[DASHBOARD_RELATION].relation_joined,
            self.on[LOGGING_RELATION].relation_changed,
            self.on[LOGGING_RELATION].relation_departed,
            self.on[LOGGING_RELATION].relation_broken,
            self.on[PEERS_RELATION].relation_joined,
            self.on[PEERS_RELATION].relation_changed,
            self.on[PEERS_RELATION].relation_departed,
        ):
            framework.observe(event, self._reconcile)
        framework.observe(self.on.remove, self._on_remove)
        framework.observe(self.on[PREPARE_REMOVAL_ACTION].action, self._on_prepare_removal)
        framework.observe(self.on.collect_unit_status, self._on_collect_status)

    # --- Reconcile ----------------------------------------------------------------------

    def _reconcile(self, _: ops.EventBase) -> None:
        """Bring the cluster and the workload in line with config and relations.

        The steps, in dependency order; each hands what it learnt to the next as its return
        value. A step that cannot go on logs why and stops the rest (the next event retries):

        1. ``_publish_cos``: the COS databags (no cluster access needed).
        2. ``_guard_cluster``: `juju trust` (one list call), the API server's version,
           removal prepared, another model's deployment on the cluster
           (``status.cluster_hold``); the last three keep the controller stopped and write
           nothing.
        3. ``_write_cluster``: (leader) CRDs, ClusterRoles, our ClusterRoleBinding, and the
           controller's Roles in its namespace, the infra, AITenant and gateway namespaces;
           open the webhook port; (leader) keep the internal CA and, without
           `certificates`, issue the fallback webhook certificate from it; (leader) the
           webhook configuration's caBundle, the old CA kept during a switch.
        4. ``_write_workload_files``: the webhook certificate and key, the maas-api CA;
           publish on `aitenant-peers` what the controller serves; the leader drops an old
           CA once every unit serves the new certificate.
        5. ``_plan_controller``: build the layer from config and relations; replan only if
           it changed.
        """
        self._facts = None  # one dispatch may reconcile twice (a library's event, then ours)
        try:
            self._publish_cos()
            self._guard_cluster(self._cluster_facts())
            written = self._write_cluster()
            self._write_workload_files(written)
            self._plan_controller(written)
        except _Stop as stop:
            logger.log(stop.level, "%s", stop)

    def _publish_cos(self) -> None:
        cos.publish(
            self.model,
            self._topology(),
            scrape_relation=METRICS_RELATION,
            dashboard_relation=DASHBOARD_RELATION,
            metrics_port=METRICS_PORT,
        )

    def _guard_cluster(self, facts: ClusterFacts) -> None:
        hold = status.cluster_hold(
            facts, app=self.app.name, removal_prepared=bool(self._stored.removal_prepared)
        )
        if hold is None:
            return
        if hold.stops_controller:
            pebble_layer.stop_controller(self.unit.get_container(CONTAINER))
        raise _Stop(hold.log, hold.level)

    def _write_cluster(self) -> _ClusterWritten:
        """The cluster objects, the webhook port, the certificates and the webhook
        configuration. The outcome is stored (``cluster_error``, "" when every write
        succeeded) since collect-status, in this hook or a later one, reports it."""
        try:
            written = self._write_cluster_steps()
        except ApiError as exc:
            error = f"{exc.status.code} {exc.status.message}"
        except api_server_writes.ClusterStepError as exc:
            error = str(exc)
        else:
            self._stored.cluster_error = ""
            return written
        # A refusal (a 409/422/429/5xx, or what the operator must fix) waits for the next event.
        self._stored.cluster_error = error
        raise _Stop(f"applying cluster objects failed: {error}", logging.WARNING)

    def _write_cluster_steps(self) -> _ClusterWritten:
        leader = self.unit.is_leader()
        if leader:
            api_server_writes.apply_cluster_objects(
                self._kube,
                app=self.app.name,
                model=self.model.name,
                namespaces=self._role_namespaces(),
            )
        self.unit.set_ports(workload.WEBHOOK_PORT)
        if leader:
            now = datetime.datetime.now(datetime.UTC)
            internal_ca.keep_internal_ca(self.model, now=now)
            if not self._certificates_related():
                names = self._service_dns_names()
                internal_ca.keep_fallback_webhook_cert(self.model, names=names, now=now)
        tls = self._webhook_tls()
        overlapping = False
        if leader and tls is not None:
            overlapping = webhook_trust.keep_webhook_configuration(self._kube, self.model, tls)
        return _ClusterWritten(
            ca=internal_ca.internal_ca(self.model), tls=tls, overlapping=overlapping
        )

    def _write_workload_files(self, written: _ClusterWritten) -> None:
        container = self.unit.get_container(CONTAINER)
        if not container.can_connect():
            raise _Stop(f"container {CONTAINER} not reachable yet")
        tls = written.tls
        if tls is not None:
            webhook_trust.publish_and_settle(
                self._kube,
                self.model,
                tls,
                files_changed=workload.write_webhook_files(
                    container, cert_pem=tls.cert_pem, key_pem=tls.key_pem
                ),
                running=pebble_layer.service_status(container) == "active",
                overlapping=written.overlapping,
            )
        if written.ca is not None:
            workload.write_ca_files(container, written.ca)

    def _plan_controller(self, written: _ClusterWritten) -> None:
        container = self.unit.get_container(CONTAINER)
        layer = self._construct_layer(container)
        if layer is None or written.tls is None or written.ca is None:
            raise _Stop("controller inputs incomplete; service not planned")
        pebble_layer.replan(container, layer, health_port=HEALTH_PORT)

    # --- Actions and removal ----------------------------------------------------------------

    def _on_prepare_removal(self, event: ops.ActionEvent) -> None:
        """Stop the controller and release our finalizers so nothing hangs after removal
        (``removal.prepare_removal`` says what it does and what it never does)."""
        if not self.unit.is_leader():
            event.fail("run this action on the leader unit")
            return
        if self.app.planned_units() > 1:
            event.fail(
                f"scale to one unit first: juju scale-application {self.app.name} 1 "
                "(another unit would restart the controller and add the finalizers back)"
            )
            return
        access = self._cluster_facts().access
        if not access.trusted:
            event.fail(f"Kubernetes API not usable: {access.error or 'trust'}")
            return
        self._stored.removal_prepared = True
        pebble_layer.stop_controller(self.unit.get_container(CONTAINER))
        try:
            released = removal.prepare_removal(self._kube, app=self.app.name, model=self.model.name)
        except ApiError as exc:
            event.fail(f"releasing finalizers failed: {exc.status.code} {exc.status.message}")
            return
        event.set_results(released.results())
        event.log(
            f"released {len(released.aitenants)} AITenant(s) and "
            f"{len(released.configs)} MaasTenantConfig(s)"
        )

    def _on_remove(self, _: ops.RemoveEvent) -> None:
        """When the whole application goes, drop what would break the cluster without it."""
        if self.app.planned_units() > 0:
            return
        facts = self._cluster_facts()
        if not facts.access.trusted or facts.error:
            return
        if facts.other is not None:
            return  # the objects named like ours were never ours to delete
        removal.delete_deployment_objects(self._kube, app=self.app.name, model=self.model.name)

    # --- Status -------------------------------------------------------------------------

    def _on_collect_status(self, event: ops.CollectStatusEvent) -> None:
        event.add_status(self._assess())
        self._facts = None  # the last handler of the dispatch: the next one reads afresh

    def _assess(self) -> ops.StatusBase:
        """The status ladder (``aitenant_charm.status``): the first rung that fails wins."""
        hold = status.cluster_hold(
            self._cluster_facts(),
            app=self.app.name,
            removal_prepared=bool(self._stored.removal_prepared),
        )
        if hold is not None:
            return hold.status
        try:
            config = self.load_config(CharmConfig)
        except ValidationError as exc:
            return status.invalid_config(exc)
        if self.unit.is_leader() and self._stored.cluster_error:
            return ops.WaitingStatus(f"cluster objects not applied: {self._stored.cluster_error}")
        container = self.unit.get_container(CONTAINER)
        if not container.can_connect():
            return ops.WaitingStatus(f"waiting for the {CONTAINER} container")
        certificates = CERTIFICATES_RELATION if self._certificates_related() else None
        found = (
            status.of_gateway(
                resolve_gateway(config, self._gateway_facts())[1], relation=GATEWAY_RELATION
            )
            or status.of_maas_api(self.maas_api, config, relation=MAAS_API_RELATION)
            or status.of_certificates(
                has_ca=internal_ca.internal_ca(self.model) is not None,
                webhook_tls=self._webhook_tls,
                certificates_relation=certificates,
            )
            or status.of_controller(
                container, self._construct_layer(container), health_port=HEALTH_PORT
            )
        )
        if found is not None:
            return found
        leader = self.unit.is_leader()
        tenants = count_tenants(self._kube) if leader else None
        return status.active(leader=leader, tenants=tenants)

    # --- Reads (no writes) ----------------------------------------------------------------

    @property
    def _kube(self) -> Client:
        if self._client is None:
            self._client = Client(field_manager=FIELD_MANAGER)
        return self._client

    def _topology(self) -> cos.Topology:
        return cos.topology_of(self.model, self.meta.name)

    def _service_dns_names(self) -> list[str]:
        return pki.service_dns_names(self.app.name, self.model.name)

    def _cluster_facts(self) -> ClusterFacts:
        """Trust, the server version and another deployment: read once per dispatch, by the
        first handler that needs them (reconcile, then collect-status reads the same)."""
        if self._facts is None:
            ours = cluster_manifests.cluster_scoped_name(self.app.name, self.model.name)
            self._facts = read_cluster_facts(self._kube, ours=ours)
        return self._facts

    def _certificates_related(self) -> bool:
        return self.model.get_relation(CERTIFICATES_RELATION) is not None

    def _webhook_tls(self) -> WebhookTLS | None:
        return webhook_trust.webhook_tls(
            self.model, self.certificates, self._cert_request, relation=CERTIFICATES_RELATION
        )

    def _valid_config(self) -> CharmConfig | None:
        """The config, or None while it is invalid (collect-status says why)."""
        try:
            return self.load_config(CharmConfig)
        except ValidationError:
            return None

    def _gateway_facts(self) -> GatewayFacts | None:
        metadata = self.gateway.get_metadata()
        if metadata is None:
            return None
        return GatewayFacts(namespace=metadata.namespace, name=metadata.gateway_name)

    def _maas_api_data(self, config: CharmConfig) -> MaasApiAppData | None:
        """The `maas-api` relation's data, or None while it is missing, invalid or refused
        (``maas_api_refusal``; collect-status says why)."""
        data = self.maas_api.get_data()
        return data if data is not None and maas_api_refusal(config, data) is None else None

    def _role_namespaces(self) -> cluster_manifests.RoleNamespaces | None:
        """Where the controller's Roles go (the namespaces its flags name); None while the
        config is invalid."""
        config = self._valid_config()
        if config is None:
            return None
        gateway, _ = resolve_gateway(config, self._gateway_facts())
        return cluster_manifests.RoleNamespaces(
            infra=infra_namespace_of(config, self._maas_api_data(config)) or self.model.name,
            aitenant=config.aitenant_namespace,
            gateway=gateway.namespace if gateway is not None else None,
        )

    def _construct_layer(self, container: ops.Container) -> ops.pebble.Layer | None:
        """The layer the charm would plan now; None while its inputs are missing."""
        config = self._valid_config()
        if config is None:
            return None
        maas_api = self._maas_api_data(config)
        inputs = workload.controller_inputs(
            config, self._gateway_facts(), maas_api, app=self.app.name
        )
        if inputs is None:
            return None
        targets = cos.log_targets_of(
            self.model, container, self._topology(), loki_relation=LOGGING_RELATION
        )
        return pebble_layer.construct_layer(inputs, namespace=self.model.name, log_targets=targets)


if __name__ == "__main__":  # pragma: nocover
    ops.main(AITenantCharm)
