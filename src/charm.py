#!/usr/bin/env python3
"""Juju sidecar charm that runs the AITenant controller under Pebble.

Every event that matters goes to one level-based ``_reconcile``; only the collect-status
handler decides the unit's status. Pure builders live in ``charm_*`` modules: configuration
(``charm_config``), flags (``charm_flags``), cluster objects (``charm_manifests``), the
internal CA (``charm_pki``) and the COS relation databags (``charm_cos``).
"""

from __future__ import annotations

import base64
import datetime
import logging
import shlex
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import httpx2
import ops
from charmlibs.interfaces.gateway_metadata import GatewayMetadataRequirer
from charmlibs.interfaces.tls_certificates import (
    CertificateRequestAttributes,
    Mode,
    TLSCertificatesRequiresV4,
)
from lightkube import Client
from lightkube.core.exceptions import ApiError, ConfigError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding, Role, RoleBinding
from lightkube.types import PatchType
from pydantic import ValidationError

import charm_cos
import charm_lightkube
import charm_manifests
import charm_pki
from aitenant import contract, kubernetes_version
from charm_config import CharmConfig, describe_error
from charm_flags import (
    ControllerInputs,
    GatewayFacts,
    Ports,
    WorkloadPaths,
    controller_args,
    infra_namespace_of,
    resolve_gateway,
)
from charms.aitenant_k8s.v0.maas_api import DatabagError, MaasApiAppData, MaasApiRequirer

logger = logging.getLogger(__name__)

# --- Constants ---------------------------------------------------------------------------
# Workload container and its Pebble service; the container name is in metadata.yaml.
CONTAINER: Final = "aitenant-controller"
SERVICE: Final = "aitenant-controller"
LAYER: Final = "aitenant-controller"
# Relation endpoints, as declared in metadata.yaml.
GATEWAY_RELATION: Final = "gateway"
MAAS_API_RELATION: Final = "maas-api"
CERTIFICATES_RELATION: Final = "certificates"
METRICS_RELATION: Final = "metrics-endpoint"
DASHBOARD_RELATION: Final = "grafana-dashboard"
LOGGING_RELATION: Final = "logging"
# Units tell each other which webhook certificate their controller serves (read from the
# controller), so the leader drops an old CA only once every unit serves the new one.
PEERS_RELATION: Final = "aitenant-peers"
PREPARE_REMOVAL_ACTION: Final = "prepare-removal"
# Server-side apply owner of everything the charm writes to the cluster (never the
# controller's own field manager, so the two never fight over fields).
FIELD_MANAGER: Final = "aitenant-k8s"
# The webhook listens on 9443 in every unit; Juju's Service for the app exposes it, and the
# webhook configuration calls that Service on the same port.
WEBHOOK_PORT: Final = contract.DEFAULT_WEBHOOK_PORT
# /healthz and /readyz (Pebble checks), and /metrics.
HEALTH_PORT: Final = contract.DEFAULT_HEALTH_PORT
METRICS_PORT: Final = contract.DEFAULT_METRICS_PORT
# Files in the workload. The controller watches the webhook cert dir and reloads on change,
# so a renewed certificate never restarts the process.
WEBHOOK_CERT_DIR: Final = "/etc/aitenant/webhook"
MAAS_API_CA_DIR: Final = "/etc/aitenant/maas-api-ca"
MAAS_API_CA_FILE: Final = f"{MAAS_API_CA_DIR}/ca.crt"
MAAS_API_CA_KEY_FILE: Final = f"{MAAS_API_CA_DIR}/ca.key"
# rockcraft's `_daemon_` user: the controller image runs as it, and owns its key files.
WORKLOAD_UID: Final = 584792
# Juju application secrets (docs/differences.md D9): the internal CA, and the webhook
# certificate issued from it when no `certificates` relation exists.
INTERNAL_CA_LABEL: Final = "internal-ca"
WEBHOOK_CERT_LABEL: Final = "webhook-fallback-cert"
# The controller's CRDs: AITenants are counted for the status line; the prepare-removal
# action releases our finalizers from both kinds.
AITENANT = create_namespaced_resource(contract.GROUP, contract.VERSION, "AITenant", "aitenants")
MAAS_TENANT_CONFIG = create_namespaced_resource(
    contract.GROUP, contract.VERSION, "MaasTenantConfig", "maastenantconfigs"
)
# After a webhook CA switch, how long the leader waits in the hook for the controller to
# serve the new certificate (it polls its certificate files every 10 s) before dropping the
# old CA from caBundle. If it is not served by then, the old CA stays until a later event.
WEBHOOK_SETTLE_SECONDS: Final = 30.0
# After a replan, how long the hook waits for the controller to answer /readyz, so the
# status that hook leaves is already the truth (a restart is ready in about 2 s; Pebble's
# own check only runs one period after the replan, and no event follows its first success).
CONTROLLER_START_SECONDS: Final = 30.0


class ClusterStepError(Exception):
    """A cluster object cannot be applied for a reason the operator must fix; says which."""


@dataclass(frozen=True)
class ApiAccess:
    """Result of probing the Kubernetes API once per dispatch."""

    trusted: bool
    error: str = ""


@dataclass(frozen=True)
class WebhookTLS:
    """The webhook serving certificate, its key, and the CA bundle clients must trust."""

    cert_pem: str
    key_pem: str
    ca_bundle_pem: str


@dataclass(frozen=True)
class OtherDeployment:
    """Another deployment of this charm that already owns the cluster-scoped objects."""

    model: str
    binding: str


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster says, read once per dispatch by whichever handler needs it first.

    Reconcile uses these as guards and collect-status as rungs of its ladder, so the status
    after any hook (observed or not) derives from the cluster, never from what another
    handler happened to set earlier in the same process.
    """

    access: ApiAccess
    # The API server's version is older than we support: the line to show (Blocked).
    unsupported: str = ""
    # Another model's deployment serves this cluster (this one stays stopped).
    other: OtherDeployment | None = None
    # A read failed (version or ClusterRoleBindings): what failed, for a Waiting status.
    error: str = ""


class AITenantCharm(ops.CharmBase):
    """Deploy and configure the AITenant controller; wire it to MaaS API and the gateway."""

    _stored = ops.StoredState()

    def __init__(self, framework: ops.Framework):
        super().__init__(framework)
        # cluster_error: why the last attempt to apply the cluster objects failed ("" when
        # it succeeded); a fact every later hook's status can read.
        self._stored.set_default(removal_prepared=False, cluster_error="")
        self._client: Client | None = None
        self._facts: ClusterFacts | None = None

        self.gateway = GatewayMetadataRequirer(self, relation_name=GATEWAY_RELATION)
        self.maas_api = MaasApiRequirer(self, relation_name=MAAS_API_RELATION)
        self._cert_request = CertificateRequestAttributes(
            common_name=self._service_dns_names()[0][:64],
            sans_dns=self._service_dns_names(),
        )
        self.certificates = TLSCertificatesRequiresV4(
            self,
            CERTIFICATES_RELATION,
            certificate_requests=[self._cert_request],
            mode=Mode.UNIT,
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

        Steps, in dependency order; a guard logs and returns (the next event retries):

        1. Check trust: one list call; 403 means `juju trust` is missing.
        2. Leader: apply the CRDs (as this API server version accepts them) and ClusterRoles
           (server-side apply), bind the controller's ClusterRole to the app's service
           account, and apply its Roles and RoleBindings in the controller namespace (leader
           Lease) and the infra namespace (tenant platform), removing ours from a previous
           infra namespace.
        3. Open the webhook port on the app's Service.
        4. Leader: create or rotate the internal CA; issue the fallback webhook certificate
           when no `certificates` relation exists.
        5. Leader: apply the ValidatingWebhookConfiguration with the serving CA as caBundle.
        6. Wait for the container; write the webhook certificate/key and the maas-api CA.
        7. Build the Pebble layer from config and relations; replan only if it changed.
        Before anything: publish the COS databags (they need no cluster access). After the
        trust check, a deployment prepared for removal, or a second deployment on a cluster
        another model already serves, keeps its controller stopped and writes nothing.
        """
        self._reconcile_cos()
        # 1.
        self._facts = None
        facts = self._cluster_facts()
        if not facts.access.trusted:
            logger.info("Kubernetes API not usable yet: %s", facts.access.error)
            return
        if facts.error:
            logger.info("cannot read the cluster yet: %s", facts.error)
            return
        if facts.unsupported:
            logger.warning("%s; nothing applied", facts.unsupported)
            self._stop_controller()
            return
        if self._stored.removal_prepared:
            self._stop_controller()
            return
        if facts.other is not None:
            logger.warning("model %s already runs this charm on the cluster", facts.other.model)
            self._stop_controller()
            return
        is_leader = self.unit.is_leader()
        now = datetime.datetime.now(datetime.UTC)
        try:
            # 2.
            if is_leader:
                self._reconcile_cluster_objects()
            # 3.
            self.unit.set_ports(WEBHOOK_PORT)
            # 4.
            if is_leader:
                self._reconcile_internal_ca(now)
                if not self._certificates_related():
                    self._reconcile_fallback_webhook_cert(now)
            tls = self._webhook_tls()
            # 5.
            overlapping = False
            if is_leader and tls is not None:
                overlapping = self._reconcile_webhook_configuration(tls)
        except ApiError as exc:
            # A 409/422/429/5xx: record it for the status ladder, retry on the next event.
            self._record_cluster_error(f"{exc.status.code} {exc.status.message}")
            return
        except ClusterStepError as exc:
            self._record_cluster_error(str(exc))
            return
        self._stored.cluster_error = ""
        # 6.
        container = self.unit.get_container(CONTAINER)
        if not container.can_connect():
            logger.info("container %s not reachable yet", CONTAINER)
            return
        if tls is not None:
            changed = self._reconcile_webhook_files(container, tls)
            if changed or overlapping:
                self._wait_for_own_webhook(container, tls)
            self._publish_webhook_serving(tls)
            if overlapping:
                self._settle_webhook_trust(tls)
        ca = self._internal_ca()
        if ca is not None:
            self._reconcile_ca_files(container, ca)
        # 7.
        inputs = self._controller_inputs()
        if inputs is None or tls is None or ca is None:
            logger.info("controller inputs incomplete; service not planned")
            return
        targets = self._log_targets(container)
        layer = self._construct_layer(inputs, log_targets=targets)
        self._reconcile_pebble(container, layer)

    def _record_cluster_error(self, error: str) -> None:
        logger.warning("applying cluster objects failed: %s", error)
        self._stored.cluster_error = error

    # --- COS ------------------------------------------------------------------------------

    def _topology(self) -> charm_cos.Topology:
        return charm_cos.Topology(
            model=self.model.name,
            model_uuid=self.model.uuid,
            application=self.app.name,
            unit=self.unit.name,
            charm_name=self.meta.name,
        )

    def _reconcile_cos(self) -> None:
        """Publish the scrape job, alert rules and dashboard (leader), and this unit's address.

        Writes only what differs, so an unchanged charm leaves the databags untouched.
        """
        topology = self._topology()
        address = charm_cos.unit_address(self.unit.name, self.app.name, self.model.name)
        for relation in self.model.relations[METRICS_RELATION]:
            _update_databag(
                relation.data[self.unit], charm_cos.scrape_unit_data(self.unit.name, address)
            )
            if self.unit.is_leader():
                rules = charm_cos.load_alert_rules(topology)
                data = charm_cos.scrape_app_data(topology, port=METRICS_PORT, alert_rules=rules)
                _update_databag(relation.data[self.app], data)
        if self.unit.is_leader():
            for relation in self.model.relations[DASHBOARD_RELATION]:
                data = charm_cos.dashboard_app_data(topology, charm_cos.load_dashboards())
                _update_databag(relation.data[self.app], data)

    def _log_targets(self, container: ops.Container) -> dict[str, dict[str, Any]]:
        """Pebble log targets for every Loki unit on `logging` (none without the relation)."""
        bags: dict[str, Mapping[str, str]] = {}
        for relation in self.model.relations[LOGGING_RELATION]:
            for unit in relation.units:
                bags[unit.name] = relation.data[unit]
        current = {
            name: target.location or "" for name, target in container.get_plan().log_targets.items()
        }
        return charm_cos.log_targets(
            charm_cos.loki_endpoints(bags), self._topology(), current=current
        )

    # --- One deployment per cluster, and removal --------------------------------------------

    def _other_deployment(self) -> OtherDeployment | None:
        """Another model's deployment that bound the controller's ClusterRole before us.

        Every deployment binds the controller's ClusterRole to its service account with a
        ClusterRoleBinding labelled as ours; the service account's namespace is the model.
        The oldest binding wins, so the first deployment keeps running and a later one stops.
        """
        ours = self._cluster_scoped_name
        bindings = list(
            self._kube.list(ClusterRoleBinding, labels=dict(charm_manifests.MANAGED_BY_LABEL))
        )
        mine = next((b for b in bindings if b.metadata and b.metadata.name == ours), None)
        mine_created = mine.metadata.creationTimestamp if mine and mine.metadata else None
        for binding in bindings:
            if binding is mine or binding.metadata is None:
                continue
            if binding.roleRef.name != charm_manifests.CONTROLLER_CLUSTER_ROLE:
                continue
            created = binding.metadata.creationTimestamp
            if mine_created is not None and created is not None and created >= mine_created:
                continue
            namespaces = [s.namespace for s in binding.subjects or [] if s.namespace]
            model = namespaces[0] if namespaces else "unknown"
            return OtherDeployment(model=model, binding=binding.metadata.name or "")
        return None

    def _stop_controller(self) -> None:
        container = self.unit.get_container(CONTAINER)
        if not container.can_connect():
            return
        # Anything but inactive: in backoff (between a crash and Pebble's restart) the
        # service is not "running", yet Pebble would start it again a moment later.
        current = _service_status(container)
        if current not in ("", "inactive"):
            container.stop(SERVICE)
            logger.info("controller stopped (was %s)", current)

    def _on_prepare_removal(self, event: ops.ActionEvent) -> None:
        """Stop the controller and release our finalizers so nothing hangs after removal.

        Nothing is revoked or deleted: tenants, their namespaces and platforms stay; only
        the finalizers the controller would have handled are removed, and the webhook
        configuration goes (no unit will serve it).
        """
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
        self._stop_controller()
        try:
            self._delete_cluster_scoped(ValidatingWebhookConfiguration)
            tenants = self._release_finalizers(AITENANT, contract.AITENANT_FINALIZER)
            configs = self._release_finalizers(MAAS_TENANT_CONFIG, contract.TENANT_CONFIG_FINALIZER)
        except ApiError as exc:
            event.fail(f"releasing finalizers failed: {exc.status.code} {exc.status.message}")
            return
        event.set_results(
            {
                "aitenants": " ".join(tenants) or "none",
                "maastenantconfigs": " ".join(configs) or "none",
                "released": str(len(tenants) + len(configs)),
            }
        )
        event.log(f"released {len(tenants)} AITenant(s) and {len(configs)} MaasTenantConfig(s)")

    def _release_finalizers(self, res: Any, finalizer: str) -> list[str]:
        """Remove ``finalizer`` from every object of ``res``; ``namespace/name`` of each."""
        released: list[str] = []
        for obj in self._kube.list(res, namespace="*"):
            meta = obj.metadata
            if meta is None or finalizer not in (meta.finalizers or []):
                continue
            if self._drop_finalizer(res, obj, finalizer):
                released.append(f"{meta.namespace}/{meta.name}")
        return released

    def _drop_finalizer(self, res: Any, obj: Any, finalizer: str, attempts: int = 5) -> bool:
        """Patch ``finalizer`` out of ``obj``; on a conflict, re-read and try again.

        resourceVersion makes the patch fail on a concurrent change (a status write, another
        finalizer) instead of dropping someone else's finalizer.
        """
        for attempt in range(attempts):
            meta = obj.metadata
            finalizers = list(meta.finalizers or [])
            if finalizer not in finalizers:
                return False
            remaining = [f for f in finalizers if f != finalizer]
            patch = {"metadata": {"finalizers": remaining, "resourceVersion": meta.resourceVersion}}
            try:
                self._kube.patch(
                    res, meta.name, patch, namespace=meta.namespace, patch_type=PatchType.MERGE
                )
                return True
            except ApiError as exc:
                if exc.status.code == 404:
                    return False
                if exc.status.code != 409 or attempt == attempts - 1:
                    raise
            obj = self._kube.get(res, meta.name, namespace=meta.namespace)
        return False

    def _delete_cluster_scoped(self, kind: Any) -> None:
        name = self._cluster_scoped_name
        try:
            self._kube.delete(kind, name)
        except ApiError as exc:
            if exc.status.code != 404:
                raise

    def _reconcile_cluster_objects(self) -> None:
        crds = charm_manifests.load_crds()
        roles = charm_manifests.load_cluster_roles()
        binding = charm_manifests.construct_cluster_role_binding(
            name=self._cluster_scoped_name,
            service_account=self.app.name,
            namespace=self.model.name,
        )
        for obj in (*crds, *roles, binding):
            self._kube.apply(obj, force=True)
        logger.debug("applied %s", charm_manifests.names((*crds, *roles, binding)))
        self._reconcile_namespaced_rbac()

    def _reconcile_namespaced_rbac(self) -> None:
        """The controller's Roles: Lease in its namespace, platform in the infra namespace.

        The infra namespace is the controller's (`infra-namespace`, else the `maas-api`
        relation's, else the model's); it must exist. When it changes, the Roles follow and
        ours in the previous namespace are deleted once the new ones are in place.
        """
        try:
            config = self.load_config(CharmConfig)
        except ValidationError:
            return  # Blocked on the config; keep what the controller has now
        infra = infra_namespace_of(config, self.maas_api.get_data()) or self.model.name
        desired = charm_manifests.construct_namespaced_rbac(
            prefix=charm_manifests.namespaced_rbac_prefix(self.app.name, self.model.name),
            controller_namespace=self.model.name,
            infra_namespace=infra,
            service_account=self.app.name,
        )
        for obj in desired:
            try:
                self._kube.apply(obj, force=True)
            except ApiError as exc:
                namespace = obj.metadata.namespace if obj.metadata else ""
                if exc.status.code == 404 and namespace == infra != self.model.name:
                    raise ClusterStepError(
                        f"infra namespace {infra!r} does not exist: create it (with the "
                        "maas-api database Secret) or change `infra-namespace`"
                    ) from None
                raise
        existing: list[Role | RoleBinding] = [
            *self._kube.list(Role, namespace="*", labels={**charm_manifests.MANAGED_BY_LABEL}),
            *self._kube.list(
                RoleBinding, namespace="*", labels={**charm_manifests.MANAGED_BY_LABEL}
            ),
        ]
        for obj in charm_manifests.stale_namespaced_rbac(existing, desired):
            assert obj.metadata is not None
            assert obj.metadata.name is not None
            try:
                self._kube.delete(type(obj), obj.metadata.name, namespace=obj.metadata.namespace)
            except ApiError as exc:
                if exc.status.code != 404:
                    raise
            logger.info(
                "deleted %s %s/%s (infra namespace is now %s)",
                type(obj).__name__,
                obj.metadata.namespace,
                obj.metadata.name,
                infra,
            )

    def _reconcile_internal_ca(self, now: datetime.datetime) -> None:
        secret, content = self._read_secret(INTERNAL_CA_LABEL)
        name = f"{self.app.name} internal CA ({self.model.name})"
        new = charm_pki.next_ca_content(content, common_name=name, now=now)
        if new is not None:
            logger.info("%s the internal CA", "rotating" if content else "creating")
            self._write_secret(secret, INTERNAL_CA_LABEL, new)

    def _reconcile_fallback_webhook_cert(self, now: datetime.datetime) -> None:
        ca = self._internal_ca()
        if ca is None:
            return
        secret, content = self._read_secret(WEBHOOK_CERT_LABEL)
        names = self._service_dns_names()
        new = charm_pki.next_server_content(content, ca=ca, names=names, now=now)
        if new is not None:
            logger.info("issuing the webhook certificate from the internal CA")
            self._write_secret(secret, WEBHOOK_CERT_LABEL, new)

    def _reconcile_webhook_configuration(self, tls: WebhookTLS) -> bool:
        """Publish the CA bundle the API server needs to trust what the webhook serves.

        While the workload still serves a certificate from another CA (a switch of the
        `certificates` relation, or a CA rotation, before the controller reloaded its files),
        the CAs already published stay next to the new one, so no admission is refused in
        between. Returns True while the bundle holds such old CAs.
        """
        published = self._published_ca_bundle()
        bundle = tls.ca_bundle_pem
        switching = published and published.strip() != tls.ca_bundle_pem.strip()
        if switching and self._units_not_serving(tls):
            now = datetime.datetime.now(datetime.UTC)
            bundle = charm_pki.merge_bundles(tls.ca_bundle_pem, published, now=now)
        self._apply_webhook_configuration(bundle)
        return bundle != tls.ca_bundle_pem

    def _apply_webhook_configuration(self, ca_bundle_pem: str) -> None:
        webhook = charm_manifests.construct_webhook_configuration(
            name=self._cluster_scoped_name,
            ca_bundle_pem=ca_bundle_pem.encode(),
            service_name=self.app.name,
            service_namespace=self.model.name,
            port=WEBHOOK_PORT,
        )
        self._kube.apply(webhook, force=True)

    def _settle_webhook_trust(self, tls: WebhookTLS) -> None:
        """Drop the old CAs from caBundle once every unit serves a certificate the new
        bundle trusts; else keep them (a peer's next publication brings the leader back)."""
        lagging = self._units_not_serving(tls)
        if lagging:
            logger.info("old webhook CA kept: not yet serving the new one: %s", lagging)
            return
        try:
            self._apply_webhook_configuration(tls.ca_bundle_pem)
        except ApiError as exc:
            logger.warning("could not drop the previous webhook CA yet: %s", exc)
            return
        logger.info("every unit serves the new certificate; previous CA dropped from caBundle")

    def _wait_for_own_webhook(self, container: ops.Container, tls: WebhookTLS) -> None:
        """After new certificate files: wait (bounded) for this unit's running controller
        to serve them (it polls its files every 10 s), so what it publishes is current."""
        if _service_status(container) != "active":
            return
        deadline = time.monotonic() + WEBHOOK_SETTLE_SECONDS
        while not self._workload_serves(tls):
            if time.monotonic() >= deadline:
                logger.info("the controller still serves the previous webhook certificate")
                return
            time.sleep(1)

    def _publish_webhook_serving(self, tls: WebhookTLS) -> None:
        """Publish on the peer relation what this unit's controller serves (read from the
        controller, not from the files); the leader also publishes the CAs it trusts, so a
        CA switch wakes every unit up (an app secret's owner gets no secret-changed)."""
        relation = self.model.get_relation(PEERS_RELATION)
        if relation is None:
            return
        served = served_certificate("127.0.0.1", WEBHOOK_PORT)
        _update_databag(
            relation.data[self.unit], charm_pki.serving_facts(served, tls.ca_bundle_pem)
        )
        if self.unit.is_leader():
            cas = ",".join(charm_pki.fingerprints(tls.ca_bundle_pem))
            _update_databag(relation.data[self.app], {charm_pki.TRUSTED_CAS: cas})

    def _units_not_serving(self, tls: WebhookTLS) -> list[str]:
        """Units whose controller does not serve a certificate ``tls``'s CA bundle trusts.

        This unit is probed; peers say so on the peer relation (``serving_facts``). Units
        planned but not on the relation yet count as not serving.
        """
        lagging: list[str] = []
        own = charm_pki.serving_facts(
            served_certificate("127.0.0.1", WEBHOOK_PORT), tls.ca_bundle_pem
        )
        if not own[charm_pki.SERVED_CA]:
            lagging.append(self.unit.name)
        relation = self.model.get_relation(PEERS_RELATION)
        peers = relation.units if relation is not None else set()
        trusted = set(charm_pki.fingerprints(tls.ca_bundle_pem))
        for unit in sorted(peers, key=lambda u: u.name):
            assert relation is not None
            if relation.data[unit].get(charm_pki.SERVED_CA) not in trusted:
                lagging.append(unit.name)
        missing = self.app.planned_units() - 1 - len(peers)
        if missing > 0:
            lagging.append(f"{missing} unit(s) not on `{PEERS_RELATION}` yet")
        return lagging

    def _reconcile_webhook_files(self, container: ops.Container, tls: WebhookTLS) -> bool:
        """Write the webhook certificate and key; True when either changed."""
        return any(
            [
                _push_if_changed(container, f"{WEBHOOK_CERT_DIR}/tls.crt", tls.cert_pem, 0o644),
                _push_if_changed(container, f"{WEBHOOK_CERT_DIR}/tls.key", tls.key_pem, 0o600),
            ]
        )

    def _reconcile_ca_files(self, container: ops.Container, ca: charm_pki.KeyPair) -> None:
        _push_if_changed(container, MAAS_API_CA_FILE, ca.cert_pem, 0o644)
        _push_if_changed(container, MAAS_API_CA_KEY_FILE, ca.key_pem, 0o600)

    def _reconcile_pebble(self, container: ops.Container, layer: ops.pebble.Layer) -> None:
        if _planned_as(container.get_plan(), layer):
            return
        container.add_layer(LAYER, layer, combine=True)
        try:
            container.replan()
        except ops.pebble.ChangeError as exc:
            # The real Pebble fails the replan when the service exits within its first
            # second; it keeps restarting it (backoff), which the status ladder reports.
            logger.warning("controller (re)planned but exited at once: %s", exc.err)
            return
        started = time.monotonic()
        deadline = started + CONTROLLER_START_SECONDS
        while not controller_ready("127.0.0.1", HEALTH_PORT):
            if time.monotonic() >= deadline:
                logger.info("controller (re)planned; not ready after %.0f s", deadline - started)
                return
            time.sleep(0.2)
        logger.info("controller (re)planned; ready after %.1f s", time.monotonic() - started)

    def _construct_layer(
        self,
        inputs: ControllerInputs,
        *,
        log_targets: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> ops.pebble.Layer:
        """The Pebble layer that runs the controller. Pure: no I/O."""
        health = f"http://localhost:{inputs.ports.health}"
        layer = ops.pebble.Layer(
            {
                "summary": "AITenant controller",
                "services": {
                    SERVICE: {
                        "override": "replace",
                        "summary": "AITenant controller and admission webhook",
                        "command": shlex.join(controller_args(inputs)),
                        "startup": "enabled",
                        "user-id": WORKLOAD_UID,
                        "group-id": WORKLOAD_UID,
                        # No fingerprint of the CA here: the controller re-reads its CA
                        # files and webhook certificate when they change, so a rotation
                        # never restarts it (a restart would refuse admissions meanwhile).
                        "environment": {"POD_NAMESPACE": self.model.name},
                        "on-check-failure": {"alive": "restart"},
                    }
                },
                "checks": {
                    "alive": {
                        "override": "replace",
                        "level": "alive",
                        "period": "10s",
                        "threshold": 3,
                        "http": {"url": f"{health}/healthz"},
                    },
                    "ready": {
                        "override": "replace",
                        "level": "ready",
                        "period": "10s",
                        "threshold": 3,
                        "http": {"url": f"{health}/readyz"},
                    },
                },
            }
        )
        for name, target in (log_targets or {}).items():
            layer.log_targets[name] = ops.pebble.LogTarget(name, dict(target))  # pyright: ignore[reportArgumentType]
        return layer

    # --- Remove -------------------------------------------------------------------------

    def _on_remove(self, _: ops.RemoveEvent) -> None:
        """When the whole application goes, drop what would break the cluster without it.

        The webhook configuration would reject every AITenant write once no unit serves it,
        and the bindings (and the Roles they bind) grant rights to a service account that is
        going away. CRDs, ClusterRoles and tenants hold or serve user data and are never
        deleted.
        """
        if self.app.planned_units() > 0:
            return
        facts = self._cluster_facts()
        if not facts.access.trusted or facts.error:
            return
        if facts.other is not None:
            return  # the objects named like ours were never ours to delete
        name = self._cluster_scoped_name
        for kind in (ValidatingWebhookConfiguration, ClusterRoleBinding):
            try:
                self._delete_cluster_scoped(kind)
            except ApiError as exc:
                if exc.status.code != 404:
                    logger.warning("could not delete %s %s: %s", kind.__name__, name, exc)
        prefix = charm_manifests.namespaced_rbac_prefix(self.app.name, self.model.name) + "-"
        for namespaced in (RoleBinding, Role):
            try:
                for obj in self._kube.list(
                    namespaced, namespace="*", labels={**charm_manifests.MANAGED_BY_LABEL}
                ):
                    meta = obj.metadata
                    if meta and meta.name and meta.name.startswith(prefix):
                        self._kube.delete(namespaced, meta.name, namespace=meta.namespace)
            except ApiError as exc:
                if exc.status.code != 404:
                    logger.warning("could not delete %s objects: %s", namespaced.__name__, exc)

    # --- Status -------------------------------------------------------------------------

    def _on_collect_status(self, event: ops.CollectStatusEvent) -> None:
        event.add_status(self._assess())
        self._facts = None  # the last handler of the dispatch: the next one reads afresh

    def _assess(self) -> ops.StatusBase:
        """The status ladder: the first failing check wins, so the order is the priority.

        Every rung reads a fact available in any hook: the cluster (through
        ``_cluster_facts``), stored state, config, relation data, secrets and the workload
        container. None reads what another handler of this dispatch may have set.
        """
        facts = self._cluster_facts()
        if not facts.access.trusted:
            if not facts.access.error:
                return ops.BlockedStatus(f"run `juju trust {self.app.name} --scope=cluster`")
            return ops.WaitingStatus(f"Kubernetes API not reachable: {facts.access.error}")
        if facts.error:
            return ops.WaitingStatus(f"Kubernetes API: {facts.error}")
        if facts.unsupported:
            return ops.BlockedStatus(facts.unsupported)
        if self._stored.removal_prepared:
            return ops.BlockedStatus(
                "prepared for removal: controller stopped, finalizers released; "
                f"run `juju remove-application {self.app.name}`"
            )
        if facts.other is not None:
            return ops.BlockedStatus(
                f"model {facts.other.model!r} already runs this charm on the cluster "
                f"(ClusterRoleBinding {facts.other.binding}); one deployment per cluster"
            )
        try:
            config = self.load_config(CharmConfig)
        except ValidationError as exc:
            option, reason = describe_error(exc)
            return ops.BlockedStatus(f"invalid config {option}: {reason}")
        if self.unit.is_leader() and self._stored.cluster_error:
            return ops.WaitingStatus(f"cluster objects not applied: {self._stored.cluster_error}")
        container = self.unit.get_container(CONTAINER)
        if not container.can_connect():
            return ops.WaitingStatus(f"waiting for the {CONTAINER} container")
        _, missing = resolve_gateway(config, self._gateway_facts())
        if missing:
            options = " and ".join(f"`{option}`" for option in missing)
            return ops.BlockedStatus(
                f"gateway unknown: set {options} or integrate `{GATEWAY_RELATION}`"
            )
        if not self.maas_api.is_related:
            return ops.BlockedStatus(f"missing relation: integrate `{MAAS_API_RELATION}`")
        try:
            if self.maas_api.read() is None:
                return ops.WaitingStatus(f"waiting for `{MAAS_API_RELATION}` relation data")
        except DatabagError as exc:
            return ops.BlockedStatus(f"invalid `{MAAS_API_RELATION}` relation data: {exc}")
        if self._internal_ca() is None:
            return ops.WaitingStatus("waiting for the leader to create the internal CA")
        if self._webhook_tls() is None:
            if self._certificates_related():
                return ops.WaitingStatus(
                    f"waiting for the webhook certificate from `{CERTIFICATES_RELATION}`"
                )
            return ops.WaitingStatus("waiting for the leader to issue the webhook certificate")
        waiting = self._assess_controller(container)
        if waiting is not None:
            return waiting
        if not self.unit.is_leader():
            return ops.ActiveStatus("standby (leader election is the controller's)")
        tenants = self._count_tenants()
        if tenants is None:
            return ops.ActiveStatus()
        return ops.ActiveStatus(f"{tenants} tenant{'' if tenants == 1 else 's'}")

    def _assess_controller(self, container: ops.Container) -> ops.StatusBase | None:
        """The workload rungs: planned by us, running, and answering /readyz right now.

        The rock's own layer already defines the service before the charm plans anything,
        so "planned" means "as the charm would plan it now". Pebble's ready check says `up`
        with no success before its first run (one period after each replan) and does not
        see a crash that Pebble restarts within a period, so Active needs the controller to
        answer /readyz to the charm's own probe (the pod shares one network namespace).
        """
        inputs = self._controller_inputs()
        if inputs is None:
            return ops.WaitingStatus("waiting for the controller service to be planned")
        layer = self._construct_layer(inputs, log_targets=self._log_targets(container))
        if not _planned_as(container.get_plan(), layer):
            return ops.WaitingStatus("waiting for the controller service to be planned")
        current = _service_status(container)
        if current != "active":
            return ops.WaitingStatus(f"controller service {current or 'absent'}")
        checks = container.get_checks("ready")
        if "ready" in checks and checks["ready"].status == ops.pebble.CheckStatus.DOWN:
            return ops.WaitingStatus("controller not ready: /readyz failing")
        if not controller_ready("127.0.0.1", HEALTH_PORT):
            return ops.WaitingStatus("controller starting: /readyz not answering yet")
        return None

    # --- Reads (no writes) ----------------------------------------------------------------

    @property
    def _kube(self) -> Client:
        if self._client is None:
            self._client = Client(field_manager=FIELD_MANAGER)
        return self._client

    @property
    def _cluster_scoped_name(self) -> str:
        return charm_manifests.cluster_scoped_name(self.app.name, self.model.name)

    def _service_dns_names(self) -> list[str]:
        return charm_pki.service_dns_names(self.app.name, self.model.name)

    def _cluster_facts(self) -> ClusterFacts:
        """Trust, the server version and another deployment: read once per dispatch."""
        if self._facts is None:
            self._facts = self._read_cluster_facts()
        return self._facts

    def _read_cluster_facts(self) -> ClusterFacts:
        access = self._probe_api()
        if not access.trusted:
            return ClusterFacts(access=access)
        try:
            unsupported = kubernetes_version.unsupported_reason(
                charm_lightkube.api_version(self._kube)
            )
        except (httpx2.HTTPError, OSError, ValueError) as exc:
            return ClusterFacts(access=access, error=f"cannot read its version: {exc}")
        if unsupported is not None:
            return ClusterFacts(access=access, unsupported=unsupported)
        try:
            other = self._other_deployment()
        except ApiError as exc:
            return ClusterFacts(access=access, error=f"{exc.status.code} {exc.status.message}")
        return ClusterFacts(access=access, other=other)

    def _probe_api(self) -> ApiAccess:
        try:
            next(iter(self._kube.list(CustomResourceDefinition, chunk_size=1)), None)
        except ApiError as exc:
            if exc.status.code == 403:
                return ApiAccess(trusted=False)
            return ApiAccess(trusted=False, error=f"{exc.status.code} {exc.status.message}")
        except (ConfigError, httpx2.HTTPError, OSError) as exc:
            return ApiAccess(trusted=False, error=str(exc) or type(exc).__name__)
        return ApiAccess(trusted=True)

    def _count_tenants(self) -> int | None:
        """AITenants in the cluster, for the status line; None when the API will not say."""
        try:
            return charm_lightkube.count_objects(self._kube, AITENANT)
        except (ApiError, httpx2.HTTPError, OSError, ValueError) as exc:
            logger.debug("could not count AITenants: %s", exc)
            return None

    def _published_ca_bundle(self) -> str:
        """The caBundle (PEM) of our webhook configuration in the cluster; "" if none."""
        try:
            current = self._kube.get(ValidatingWebhookConfiguration, self._cluster_scoped_name)
        except ApiError as exc:
            if exc.status.code == 404:
                return ""
            raise
        for webhook in current.webhooks or []:
            if webhook.clientConfig.caBundle:
                return base64.b64decode(webhook.clientConfig.caBundle).decode()
        return ""

    def _workload_serves(self, tls: WebhookTLS) -> bool:
        """True when this unit's webhook port presents the certificate in ``tls``."""
        served = served_certificate("127.0.0.1", WEBHOOK_PORT)
        return served is not None and charm_pki.same_certificate(served, tls.cert_pem)

    def _read_secret(self, label: str) -> tuple[ops.Secret | None, dict[str, str]]:
        try:
            secret = self.model.get_secret(label=label)
            return secret, secret.get_content(refresh=True)
        except (ops.SecretNotFoundError, ops.ModelError):
            return None, {}

    def _write_secret(self, secret: ops.Secret | None, label: str, content: dict[str, str]) -> None:
        if secret is None:
            self.app.add_secret(content, label=label)
        else:
            secret.set_content(content)

    def _internal_ca(self) -> charm_pki.KeyPair | None:
        return charm_pki.ca_from_content(self._read_secret(INTERNAL_CA_LABEL)[1])

    def _certificates_related(self) -> bool:
        return self.model.get_relation(CERTIFICATES_RELATION) is not None

    def _webhook_tls(self) -> WebhookTLS | None:
        """The webhook certificate: from `certificates` when related, else the fallback."""
        if self._certificates_related():
            provided, key = self.certificates.get_assigned_certificate(self._cert_request)
            if provided is None or key is None:
                return None
            leaf, ca = str(provided.certificate), str(provided.ca)
            intermediates = [str(c) for c in provided.chain if str(c) not in (leaf, ca)]
            return WebhookTLS(
                cert_pem=_join_pem([leaf, *intermediates]),
                key_pem=str(key),
                ca_bundle_pem=_join_pem([ca]),
            )
        _, content = self._read_secret(WEBHOOK_CERT_LABEL)
        cert, key = content.get(charm_pki.TLS_CERT), content.get(charm_pki.TLS_KEY)
        now = datetime.datetime.now(datetime.UTC)
        bundle = charm_pki.trust_bundle(self._read_secret(INTERNAL_CA_LABEL)[1], now=now)
        if not cert or not key or not bundle:
            return None
        return WebhookTLS(cert_pem=cert, key_pem=key, ca_bundle_pem=bundle)

    def _gateway_facts(self) -> GatewayFacts | None:
        metadata = self.gateway.get_metadata()
        if metadata is None:
            return None
        return GatewayFacts(namespace=metadata.namespace, name=metadata.gateway_name)

    def _controller_inputs(self) -> ControllerInputs | None:
        """All inputs of the command line, or None while any of them is missing or invalid."""
        try:
            config = self.load_config(CharmConfig)
        except ValidationError:
            return None
        gateway, _ = resolve_gateway(config, self._gateway_facts())
        maas_api: MaasApiAppData | None = self.maas_api.get_data()
        if gateway is None or maas_api is None:
            return None
        return ControllerInputs(
            config=config,
            gateway=gateway,
            maas_api=maas_api,
            paths=WorkloadPaths(
                webhook_cert_dir=WEBHOOK_CERT_DIR,
                maas_api_ca_file=MAAS_API_CA_FILE,
                maas_api_ca_key_file=MAAS_API_CA_KEY_FILE,
            ),
            ports=Ports(webhook=WEBHOOK_PORT, health=HEALTH_PORT, metrics=METRICS_PORT),
        )


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


def controller_ready(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when the controller answers ``/readyz`` with 200 on ``host:port`` right now."""
    try:
        answer = httpx2.get(f"http://{host}:{port}/readyz", timeout=timeout)
    except (httpx2.HTTPError, OSError):
        return False
    return answer.status_code == 200


def _update_databag(databag: Any, data: Mapping[str, str]) -> None:
    """Write the keys whose value differs (Juju sees no change when nothing does)."""
    for key, value in data.items():
        if databag.get(key) != value:
            databag[key] = value


def _join_pem(pems: list[str]) -> str:
    return "".join(pem.strip() + "\n" for pem in pems if pem.strip())


class _Definition(Protocol):
    def to_dict(self) -> Mapping[str, Any]: ...


def _same_definitions(
    current: Mapping[str, _Definition], desired: Mapping[str, _Definition]
) -> bool:
    """True when every desired Pebble service/check already has the same definition."""
    return all(
        name in current and current[name].to_dict() == item.to_dict()
        for name, item in desired.items()
    )


def _service_status(container: ops.Container) -> str:
    """The controller service's current status as Pebble names it; "" when not in the plan.

    Pebble also reports "backoff" (between a crash and the restart), which ``ops`` has no
    enum member for and passes on as the plain string.
    """
    service = container.get_services(SERVICE).get(SERVICE)
    if service is None:
        return ""
    current = service.current
    return current.value if isinstance(current, ops.pebble.ServiceStatus) else str(current)


def _planned_as(plan: ops.pebble.Plan, layer: ops.pebble.Layer) -> bool:
    """True when the plan already holds the layer's services, checks and log targets."""
    return (
        _same_definitions(plan.services, layer.services)
        and _same_definitions(plan.checks, layer.checks)
        and _same_definitions(plan.log_targets, layer.log_targets)
    )


def _push_if_changed(container: ops.Container, path: str, content: str, mode: int) -> bool:
    """Write a file only when its content differs, so watchers see real changes only; True
    when it wrote."""
    try:
        with container.pull(path) as current:
            if current.read() == content:
                return False
    except ops.pebble.PathError:
        pass
    container.push(
        path,
        content,
        make_dirs=True,
        permissions=mode,
        user_id=WORKLOAD_UID,
        group_id=WORKLOAD_UID,
    )
    return True


if __name__ == "__main__":  # pragma: nocover
    ops.main(AITenantCharm)
