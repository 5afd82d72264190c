"""MaasTenantConfig reconciler: the tenant's maas-api platform (docs/contract.md §3.6 and
§5.4; docs/differences.md D5, D6, D9).

Only configs named ``default-tenant`` are ever served. Scope follows
``--enable-tenant-namespace-discovery``: without it only the one in
``--maas-subscription-namespace``, as upstream; with it, every AITenant-managed one. A config
outside the scope gets no finalizer and no status, and nothing is deleted for it; the only write
it can get is the removal of a cleanup finalizer an older controller left on it
(``has_leftover_finalizer``).

A live config in scope, in order (each failure sets Ready=False with the reason in brackets):

1. ``ensure_finalizer``        ``maas.opendatahub.io/tenant-cleanup``, so the cleanup runs
2. ``tenant_identity``         the ``tenant-name`` label                 [InvalidTenantConfig]
3. ``platform_context``        owning AITenant's status.gatewayRef;       [InvalidGateway]
                               the Gateway must exist                     [GatewayNotReady]
4. ``telemetry_of``            spec.telemetry switches are booleans       [InvalidTenantConfig]
   ``check_inputs``            the CA files (docs/differences.md D9)      [MissingInput]
                               served APIs, the DB Secret and its key     [DependencyMissing]
5. ``serving_cert``            keep the tenant's certificate or issue a new one
6. render, apply, prune        Jinja2 templates → server-side apply;      [RenderFailed,
                               delete what is no longer rendered           ApplyFailed]
7. readiness                   Deployment maas-api[-t] Available at its   [MaaSAPINotAvailable]
                               generation → Ready=True ``Reconciled``

Live copies come from the platform cache (informers on everything the platform writes), so
reconciling an unchanged tenant reads two objects (the DB Secret and the CronJob) and writes
nothing: objects are applied only when the live copy lacks a value we render, and the status
only when it differs. Transient API answers (409, 429, 5xx) are retried with backoff, without
a status; a new tenant's first status waits for its first rollout (about a second) so it goes
straight to Ready instead of Pending-then-Ready.

A deleting config that carries the finalizer: every MaaSSubscription and MaaSAuthPolicy in its
namespace is deleted and awaited (their own finalizers tear down what they made), then every
platform object of the tenant (found by the tracking labels), then the finalizer is removed.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType

from aitenant import contract
from aitenant.errors import StepFailed, is_conflict, is_not_found
from aitenant.platform import certs, kinds
from aitenant.platform.apply import UNKNOWN, Applier, ApplyError, Scope, is_unmanaged
from aitenant.platform.cache import PlatformCache
from aitenant.platform.discovery import ApiDiscovery
from aitenant.platform.render import (
    Manifest,
    PlatformContext,
    Ref,
    RenderError,
    Telemetry,
    names_for,
    render,
    tracking_labels,
)
from aitenant.reconcilers import conditions
from aitenant.reconcilers.finalizers import drop_finalizer
from aitenant.resources import (
    AITenant,
    AITenantView,
    Gateway,
    MaaSAuthPolicy,
    MaaSSubscription,
    MaasTenantConfig,
    annotations_of,
    labels_of,
)
from aitenant.runtime.controller import Done, Key, RequeueAfter, Result, after_failure
from aitenant.runtime.reads import CachedReads
from aitenant.settings import Settings

log = logging.getLogger(__name__)

Reason = contract.ConfigReason
Obj = dict[str, Any]

REQUEUE_WAIT_FOR_CRS = 2.0
REQUEUE_FAILED = 30.0
REQUEUE_NOT_AVAILABLE = 30.0
REQUEUE_FIRST_ROLLOUT = 2.0
# Once Ready: look again now and then (drift of kinds we do not watch, certificate renewal).
RESYNC_READY = 300.0
DB_URL_KEY = "DB_CONNECTION_URL"

# Deletes the tenant's platform objects; returns True once they are all gone.
PlatformCleanup = Callable[[Obj], Awaitable[bool]]


async def no_platform(_: Obj) -> bool:
    return True


class FirstRollout(Exception):
    """The platform was just written for the first time; no status until it had a moment."""


def in_scope(config: Obj, settings: Settings) -> bool:
    """A config this reconciler serves: only ``default-tenant``, whatever the labels of any
    other (a tenant has exactly one config; another one copying its labels is not it)."""
    meta = config["metadata"]
    if meta.get("name") != contract.TENANT_CONFIG_NAME:
        return False
    if labels_of(config).get(contract.LABEL_MANAGED_BY_AITENANT) != "true":
        return False
    if settings.enable_tenant_namespace_discovery:
        return True
    return (
        meta.get("namespace") == settings.maas_subscription_namespace
        and meta.get("name") == contract.TENANT_CONFIG_NAME
    )


def has_leftover_finalizer(config: Obj, settings: Settings) -> bool:
    """Our cleanup finalizer on a config that is not a tenant's, left by an older controller:
    any config not named ``default-tenant``, and an unlabelled ``default-tenant`` in
    ``--maas-subscription-namespace`` (upstream strips it there too: that config's platform is
    never torn down per config). Without this it could never finish deleting."""
    meta = config["metadata"]
    if contract.TENANT_CONFIG_FINALIZER not in (meta.get("finalizers") or []):
        return False
    if meta.get("name") != contract.TENANT_CONFIG_NAME:
        return True
    return (
        meta.get("namespace") == settings.maas_subscription_namespace
        and labels_of(config).get(contract.LABEL_MANAGED_BY_AITENANT) != "true"
    )


def wanted(config: Obj, settings: Settings) -> bool:
    """Event predicate: a config to serve, or one to strip our leftover finalizer from."""
    return in_scope(config, settings) or has_leftover_finalizer(config, settings)


def tenant_identity(config: Obj) -> str:
    """The tenant a config belongs to (its ``tenant-name`` label), or StepFailed."""
    meta = config["metadata"]
    ref = f"tenant {meta['namespace']}/{meta['name']}"
    labels = labels_of(config)
    name = labels.get(contract.LABEL_TENANT_NAME, "")
    if not name:
        raise StepFailed(
            Reason.INVALID_TENANT_CONFIG,
            f"{ref} has {contract.LABEL_MANAGED_BY_AITENANT}=true but "
            f"{contract.LABEL_TENANT_NAME} is missing or empty",
        )
    if name == contract.DEFAULT_TENANT_NAME and (
        meta["name"] != contract.TENANT_CONFIG_NAME
        or labels.get(contract.LABEL_TENANT_NAMESPACE) != meta["namespace"]
    ):
        raise StepFailed(
            Reason.INVALID_TENANT_CONFIG,
            f"{ref} claims the default tenant {contract.DEFAULT_TENANT_NAME}, which only "
            f"{contract.TENANT_CONFIG_NAME} labelled with its own namespace may do",
        )
    return name


def deployment_available(obj: Obj | None) -> bool:
    """Available=True, observed at the Deployment's current generation."""
    if obj is None:
        return False
    status = obj.get("status") or {}
    generation = int(obj.get("metadata", {}).get("generation") or 0)
    if int(status.get("observedGeneration") or 0) < generation:
        return False
    return any(
        c.get("type") == "Available" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def replicas_for(config: Obj, default: int) -> int:
    raw = annotations_of(config).get(contract.ANNOTATION_MAAS_API_REPLICAS)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise StepFailed(
            Reason.INVALID_TENANT_CONFIG,
            f'annotation {contract.ANNOTATION_MAAS_API_REPLICAS}="{raw}" is not a '
            "non-negative integer",
        )
    return value


TELEMETRY_SWITCHES = (
    ("captureOrganization", "organization"),
    ("captureUser", "user"),
    ("captureGroup", "group"),
    ("captureModelUsage", "model_usage"),
)


def telemetry_of(config: Obj) -> Telemetry | None:
    """``spec.telemetry`` as upstream reads it: no block, no metrics; a block is enabled unless
    ``enabled: false``; each dimension keeps upstream's default unless set."""
    block = (config.get("spec") or {}).get("telemetry")
    if block is None:
        return None
    if not isinstance(block, dict):
        raise StepFailed(Reason.INVALID_TENANT_CONFIG, "spec.telemetry must be an object")
    enabled = _flag(block, "enabled", "spec.telemetry.enabled", True)
    if not enabled:
        return None
    metrics = block.get("metrics")
    if metrics is None:
        metrics = {}
    if not isinstance(metrics, dict):
        raise StepFailed(Reason.INVALID_TENANT_CONFIG, "spec.telemetry.metrics must be an object")
    defaults = Telemetry()
    return Telemetry(
        **{
            attr: _flag(metrics, field, f"spec.telemetry.metrics.{field}", getattr(defaults, attr))
            for field, attr in TELEMETRY_SWITCHES
        }
    )


def _flag(block: Obj, field: str, path: str, default: bool) -> bool:
    value = block.get(field)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise StepFailed(
            Reason.INVALID_TENANT_CONFIG, f"{path} must be true or false, not {value!r}"
        )
    return value


@dataclass(frozen=True)
class Tenant:
    """Who a config belongs to, as far as the platform needs to know."""

    name: str
    namespace: str  # the tenant namespace (the config's own)

    @property
    def selector(self) -> dict[str, str]:
        return tracking_labels(self.name, self.namespace)


class CALoader:
    """The charm's CA from ``--maas-api-ca-file``/``--maas-api-ca-key-file``, re-read on change."""

    def __init__(self, cert_file: Path | None, key_file: Path | None) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self._stamp: tuple[float, float] | None = None
        self._ca: certs.CertificateAuthority | None = None

    def load(self) -> certs.CertificateAuthority:
        if self.cert_file is None:
            raise certs.CAError("--maas-api-ca-file is not set")
        if self.key_file is None:
            raise certs.CAError("--maas-api-ca-key-file is not set")
        try:
            stamp = (self.cert_file.stat().st_mtime, self.key_file.stat().st_mtime)
        except OSError:
            stamp = None
        if self._ca is None or stamp is None or stamp != self._stamp:
            self._ca = certs.load_ca(self.cert_file, self.key_file)
            self._stamp = stamp
        return self._ca


class TenantConfigReconciler:
    def __init__(
        self,
        *,
        client: AsyncClient,
        settings: Settings,
        get_config: Callable[[str, str], Obj | None],
        get_tenant: Callable[[str, str], Obj | None] | None = None,
        reads: CachedReads | None = None,
        discovery: ApiDiscovery | None = None,
        cache: PlatformCache | None = None,
        cleanup_platform: PlatformCleanup | None = None,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        remember: Callable[[Obj], None] = lambda _obj: None,
    ) -> None:
        self.client = client
        self.settings = settings
        # The informer's copy, or the newer one our last write returned (``remember``).
        self.get_config = get_config
        self.remember = remember
        self.get_tenant = get_tenant or (lambda _ns, _name: None)
        # The Gateway (and anything else) from an informer where the manager runs one.
        self.reads = reads or CachedReads(client)
        self.discovery = discovery
        self.cache = cache
        self.cleanup_platform = cleanup_platform or self.delete_platform
        self.now = now
        self.applier = Applier(client)
        self.ca = CALoader(settings.maas_api_ca_file, settings.maas_api_ca_key_file)
        # What each config rendered on its last successful pass in this process: without a
        # synced cache, pruning (one LIST per kind) is needed only when this changes.
        self._rendered: dict[Key, frozenset[Ref]] = {}
        # Certificates issued but maybe not yet seen by the cache, by Service name.
        self._issued: dict[str, certs.ServingCert] = {}
        # The config generation the user-metrics privacy warning was last logged for.
        self._warned_user_metrics: dict[Key, int] = {}

    async def reconcile(self, key: Key) -> Result:
        config = self.get_config(key.namespace, key.name)
        if config is None:
            self._rendered.pop(key, None)
            return Done()
        if not in_scope(config, self.settings):
            if has_leftover_finalizer(config, self.settings):
                # The only write for a config we do not serve; nothing is deleted for it.
                await self.remove_finalizer(config)
                log.info(
                    "maastenantconfig %s: not a tenant's config; removed leftover finalizer %s",
                    key,
                    contract.TENANT_CONFIG_FINALIZER,
                )
            return Done()
        meta = config["metadata"]
        if meta.get("deletionTimestamp"):
            return await self.reconcile_delete(key, config)
        started = time.perf_counter()
        config = await self.ensure_finalizer(config)
        status = conditions.snapshot(config.get("status") or {})
        status["infraNamespace"] = self.settings.app_namespace
        generation = int(config["metadata"].get("generation") or 0)
        try:
            result = await self._reconcile_live(key, config, status, generation)
        except FirstRollout:
            return RequeueAfter(REQUEUE_FIRST_ROLLOUT)
        except StepFailed as failure:
            conditions.set_phase(status, failure.phase, failure.reason, failure.message, generation)
            await self.write_status(config, status)
            log.info("maastenantconfig %s: %s: %s", key, failure.reason, failure.message)
            return after_failure(failure)
        await self.write_status(config, status)
        log.debug(
            "maastenantconfig %s: %s in %.0f ms",
            key,
            conditions.ready_reason(status),
            (time.perf_counter() - started) * 1000,
        )
        return result

    async def _reconcile_live(
        self, key: Key, config: Obj, status: conditions.Status, generation: int
    ) -> Result:
        tenant = Tenant(tenant_identity(config), config["metadata"]["namespace"])
        owner, gw_namespace, gw_name = await self.platform_context(config)
        telemetry = telemetry_of(config)
        cronjob = await self.check_inputs(telemetry)
        spec = config.get("spec") or {}
        names = names_for(tenant.name, gw_name, self.settings.gateway_name)
        infra = self.settings.app_namespace
        cert_secret = await self.live(kinds.SECRET, infra, names.serving_cert)
        serving = self.serving_cert(cert_secret, names.api)
        ctx = PlatformContext(
            tenant=tenant.name,
            tenant_namespace=tenant.namespace,
            aitenant_namespace=owner.namespace,
            infra_namespace=infra,
            gateway_namespace=gw_namespace,
            gateway_name=gw_name,
            default_gateway_name=self.settings.gateway_name,
            controller_namespace=self.settings.controller_namespace,
            image=self.settings.maas_api_image,
            cleanup_image=self.settings.maas_api_cleanup_image,
            replicas=replicas_for(config, self.settings.maas_api_replicas),
            serving_cert=serving,
            cronjob_api_version=cronjob.api_version,
            max_expiration_days=int((spec.get("apiKeys") or {}).get("maxExpirationDays") or 90),
            telemetry=telemetry,
            authorino_namespaces=self.settings.authorino_namespaces,
        )
        if telemetry is not None and telemetry.user:
            self.warn_user_metrics(key, generation)
        try:
            manifests = render(ctx)
        except RenderError as exc:
            raise StepFailed(Reason.RENDER_FAILED, str(exc)) from None
        try:
            report = await self.applier.apply_all(manifests, self.cached)
            await self.prune(
                key, tenant, frozenset(m.ref for m in manifests), cronjob, gw_namespace
            )
        except ApplyError as exc:
            self._rendered.pop(key, None)
            if exc.transient:  # retried soon, with backoff; nothing to tell the tenant yet
                raise exc.cause from None
            raise StepFailed(Reason.APPLY_FAILED, str(exc)) from None
        if report.writes:
            log.info(
                "maastenantconfig %s: applied %s; created %s",
                key,
                ", ".join(report.applied) or "-",
                ", ".join(report.created) or "-",
            )
        deployment = report.live.get(("apps", "Deployment", infra, names.api))
        if not deployment_available(deployment):
            if (
                report.writes
                and conditions.find_condition(status, contract.CONDITION_READY) is None
            ):
                # A new tenant's first rollout has just started: its Deployment's watch brings
                # us back in a moment, usually Available (one status write, not two).
                raise FirstRollout
            raise StepFailed(
                Reason.MAAS_API_NOT_AVAILABLE,
                f"waiting for Deployment {infra}/{names.api} to become available",
                phase=contract.PHASE_PENDING,
                requeue_after=REQUEUE_NOT_AVAILABLE,
            )
        conditions.set_phase(
            status,
            contract.PHASE_ACTIVE,
            Reason.RECONCILED,
            contract.ConfigMessage.RECONCILED,
            generation,
        )
        return RequeueAfter(RESYNC_READY)

    # -- steps ---------------------------------------------------------------------------------
    async def ensure_finalizer(self, config: Obj) -> Obj:
        meta = config["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if contract.TENANT_CONFIG_FINALIZER in finalizers:
            return config
        patch = {
            "metadata": {
                "finalizers": [*finalizers, contract.TENANT_CONFIG_FINALIZER],
                "resourceVersion": meta["resourceVersion"],
            }
        }
        updated = dict(
            await self.client.patch(
                MaasTenantConfig,
                meta["name"],
                patch,
                namespace=meta["namespace"],
                patch_type=PatchType.MERGE,
            )
        )
        self.remember(updated)
        return updated

    async def platform_context(self, config: Obj) -> tuple[AITenantView, str, str]:
        """The owning AITenant and its Gateway (namespace, name), which must exist."""
        meta = config["metadata"]
        annotations = annotations_of(config)
        name = annotations.get(contract.ANNOTATION_AITENANT_NAME, "")
        namespace = annotations.get(contract.ANNOTATION_AITENANT_NAMESPACE, "")
        if not name or not namespace:
            raise StepFailed(
                Reason.INVALID_GATEWAY,
                f"MaasTenantConfig {meta['namespace']}/{meta['name']} does not name its "
                f"AITenant ({contract.ANNOTATION_AITENANT_NAME}, "
                f"{contract.ANNOTATION_AITENANT_NAMESPACE})",
            )
        obj = self.get_tenant(namespace, name)
        if obj is None or not _has_gateway_ref(obj):
            # The informer may not have seen the AITenant's latest status yet.
            obj = await self.reads.get(AITenant, name, namespace)
        if obj is None:
            raise StepFailed(Reason.INVALID_GATEWAY, f"AITenant {namespace}/{name} not found")
        if not _has_gateway_ref(obj):
            raise StepFailed(
                Reason.INVALID_GATEWAY,
                f"AITenant {namespace}/{name} status.gatewayRef is not ready",
            )
        ref = obj["status"]["gatewayRef"]
        gw_ns, gw_name = ref["namespace"], ref["name"]
        if await self.reads.get(Gateway, gw_name, gw_ns) is None:
            raise StepFailed(
                Reason.GATEWAY_NOT_READY,
                f"gateway {gw_ns}/{gw_name} not found: the specified Gateway must exist before "
                "enabling MaaS platform reconcile",
                phase=contract.PHASE_PENDING,
            )
        return AITenantView(obj), gw_ns, gw_name

    async def check_inputs(self, telemetry: Telemetry | None) -> kinds.Kind:
        """Flags, served APIs and the DB Secret; returns the CronJob kind to render."""
        try:
            self.ca.load()
        except certs.CAError as exc:
            raise StepFailed(Reason.MISSING_INPUT, str(exc)) from None
        cronjob = await self.check_apis(telemetry)
        secret_name = self.settings.maas_api_db_secret
        infra = self.settings.app_namespace
        secret = await self.reads.get(Secret, secret_name, infra)
        if secret is None:
            raise StepFailed(
                Reason.DEPENDENCY_MISSING,
                f"Secret {infra}/{secret_name} not found: maas-api reads {DB_URL_KEY} from it "
                "(--maas-api-db-secret)",
                phase=contract.PHASE_PENDING,
            )
        if not (secret.data or {}).get(DB_URL_KEY) and not (secret.stringData or {}).get(
            DB_URL_KEY
        ):
            raise StepFailed(
                Reason.DEPENDENCY_MISSING,
                f"Secret {infra}/{secret_name} has no {DB_URL_KEY} key",
                phase=contract.PHASE_PENDING,
            )
        return cronjob

    async def check_apis(self, telemetry: Telemetry | None) -> kinds.Kind:
        if self.discovery is None:
            return kinds.CRONJOB_V1
        required = [kinds.HTTP_ROUTE, kinds.AUTH_POLICY, kinds.TOKEN_RATE_LIMIT_POLICY]
        if telemetry is not None:
            required.append(kinds.TELEMETRY_POLICY)
        missing = [k for k in required if not await self.discovery.serves(k)]
        cronjob = await self.discovery.cronjob_kind()
        if cronjob is None:
            missing.append(kinds.CRONJOB_V1)
        if missing:
            listed = ", ".join(f"{k.kind} ({k.api_version})" for k in missing)
            raise StepFailed(
                Reason.DEPENDENCY_MISSING,
                f"the API server does not serve {listed}; install the CRDs first",
                phase=contract.PHASE_PENDING,
            )
        assert cronjob is not None
        return cronjob

    def serving_cert(self, secret: Obj | None, service: str) -> certs.ServingCert:
        """The certificate to render: the live one while it is good, else a new one."""
        current = certs.from_secret(secret)
        if secret is not None and is_unmanaged(secret):
            # Opted out: render what is there, so nothing else churns on its account.
            return current or certs.ServingCert("", "", "")
        ca = self.ca.load()
        infra = self.settings.app_namespace
        names = certs.dns_names(service, infra)
        now = self.now()
        reason = certs.renewal_reason(current, ca, names, now=now)
        if reason is None:
            assert current is not None
            self._issued.pop(service, None)
            return current
        # The cache may not have seen the Secret we wrote a moment ago: never issue twice.
        issued = self._issued.get(service)
        if issued is not None and certs.renewal_reason(issued, ca, names, now=now) is None:
            return issued
        log.info("serving certificate for %s.%s: issuing (%s)", service, infra, reason)
        self._issued[service] = certs.issue(ca, names, now=now)
        return self._issued[service]

    def scopes(self, cronjob: kinds.Kind, gateway_namespace: str) -> list[Scope]:
        """Everywhere a tenant's platform objects can be, for pruning and cleanup."""
        infra = self.settings.app_namespace
        return [
            *(
                (kind, infra)
                for kind in (
                    kinds.SERVICE_ACCOUNT,
                    kinds.SECRET,
                    kinds.DEPLOYMENT,
                    kinds.SERVICE,
                    kinds.NETWORK_POLICY,
                    kinds.HTTP_ROUTE,
                    kinds.AUTH_POLICY,  # route-level ones of older versions, pruned
                    cronjob,
                )
            ),
            (kinds.TOKEN_RATE_LIMIT_POLICY, gateway_namespace),
            (kinds.AUTH_POLICY, gateway_namespace),
            (kinds.TELEMETRY_POLICY, gateway_namespace),
            (kinds.CLUSTER_ROLE_BINDING, None),
        ]

    async def write_status(self, config: Obj, status: conditions.Status) -> bool:
        """Replace the whole status, only when it differs from what the object holds."""
        if (config.get("status") or {}) == status:
            return False
        meta = config["metadata"]
        body = {**config, "status": status}
        try:
            await self._replace_status(body)
        except ApiError as exc:
            if not is_conflict(exc):
                raise
            # Our copy was stale (often our own previous write not yet seen by the informer).
            latest = dict(
                await self.client.get(MaasTenantConfig, meta["name"], namespace=meta["namespace"])
            )
            if (latest.get("status") or {}) == status:
                return False
            latest["status"] = status
            await self._replace_status(latest)
        return True

    async def _replace_status(self, body: Obj) -> None:
        meta = body["metadata"]
        updated = await self.client.replace(
            MaasTenantConfig.Status.from_dict(body),  # pyright: ignore[reportArgumentType]
            meta["name"],
            namespace=meta["namespace"],
        )
        self.remember(dict(updated))

    def warn_user_metrics(self, key: Key, generation: int) -> None:
        """Upstream's privacy warning when user identities go into metrics; once per
        generation of the config here, not on every pass."""
        if self._warned_user_metrics.get(key) == generation:
            return
        self._warned_user_metrics[key] = generation
        log.warning(
            "maastenantconfig %s: spec.telemetry.metrics.captureUser is on: usage metrics record "
            "user identities (personal data); make sure that complies with your privacy rules "
            "(GDPR)",
            key,
        )

    # -- deletion ------------------------------------------------------------------------------
    async def reconcile_delete(self, key: Key, config: Obj) -> Result:
        if contract.TENANT_CONFIG_FINALIZER not in (config["metadata"].get("finalizers") or []):
            return Done()
        if await self.delete_maas_resources(key.namespace):
            return RequeueAfter(REQUEUE_WAIT_FOR_CRS)
        if not await self.cleanup_platform(config):
            return RequeueAfter(REQUEUE_WAIT_FOR_CRS)
        await self.remove_finalizer(config)
        self._rendered.pop(key, None)
        log.info("maastenantconfig %s: tenant cleanup finished", key)
        return Done()

    async def delete_maas_resources(self, namespace: str) -> bool:
        """Delete MaaSSubscriptions, then MaaSAuthPolicies; True while any still exist."""
        remaining = False
        for kind in (MaaSSubscription, MaaSAuthPolicy):
            try:
                items = [o async for o in self.client.list(kind, namespace=namespace)]
            except ApiError as exc:
                if is_not_found(exc):  # the kind is not installed: nothing to clean
                    continue
                raise
            for item in items:
                remaining = True
                if item["metadata"].get("deletionTimestamp"):
                    continue
                try:
                    await self.client.delete(kind, item["metadata"]["name"], namespace=namespace)
                except ApiError as exc:
                    if not is_not_found(exc):
                        raise
        return remaining

    async def delete_platform(self, config: Obj) -> bool:
        """Every platform object carrying the tenant's tracking labels (``PlatformCleanup``)."""
        labels = labels_of(config)
        name = labels.get(contract.LABEL_TENANT_NAME)
        if not name:
            return True  # never rendered anything
        tenant = Tenant(name, config["metadata"]["namespace"])
        cronjob = kinds.CRONJOB_V1
        if self.discovery is not None:
            cronjob = await self.discovery.cronjob_kind() or kinds.CRONJOB_V1
        # Upstream deletes in the controller's gateway namespace too (docs/contract.md §5.4).
        tracked = await self.tracked(tenant, cronjob, self.settings.gateway_namespace)
        return await self.applier.delete_tracked(tracked)

    async def tracked(
        self,
        tenant: Tenant,
        cronjob: kinds.Kind,
        gateway_namespace: str,
        *,
        cronjob_by_name: bool = True,
    ) -> list[tuple[kinds.Kind, Obj]]:
        """Every platform object of the tenant: from the cache when it is synced (CronJobs,
        which it does not hold, by name), else by listing each kind with the tracking labels."""
        cached = None if self.cache is None else self.cache.tracked(tenant.namespace, tenant.name)
        if cached is None:
            found: list[tuple[kinds.Kind, Obj]] = []
            for scope in self.scopes(cronjob, gateway_namespace):
                found.extend(
                    (scope[0], obj)
                    for obj in await self.applier.list_tracked(scope, tenant.selector)
                )
            return found
        if not cronjob_by_name:
            return cached
        name = names_for(tenant.name, "", self.settings.gateway_name).cleanup
        obj = await self.applier.get(cronjob, name, self.settings.app_namespace)
        if obj is not None and tenant.selector.items() <= labels_of(obj).items():
            cached.append((cronjob, obj))
        return cached

    async def remove_finalizer(self, config: Obj) -> None:
        await drop_finalizer(
            self.client, MaasTenantConfig, config, contract.TENANT_CONFIG_FINALIZER
        )

    # -- helpers -------------------------------------------------------------------------------
    def cached(self, manifest: Manifest) -> Any:
        """``Lookup`` for the applier: the informer's copy, or UNKNOWN (read the API)."""
        if self.cache is None:
            return UNKNOWN
        return self.cache.get(manifest.kind, manifest.namespace, manifest.name)

    async def live(self, kind: kinds.Kind, namespace: str | None, name: str) -> Obj | None:
        """One platform object: from the cache when it knows, else from the API."""
        found = UNKNOWN if self.cache is None else self.cache.get(kind, namespace, name)
        if found is UNKNOWN:
            return await self.applier.get(kind, name, namespace)
        return found

    async def prune(
        self,
        key: Key,
        tenant: Tenant,
        refs: frozenset[Ref],
        cronjob: kinds.Kind,
        gateway_namespace: str,
    ) -> None:
        """Delete the tenant's objects that are no longer rendered.

        From the cache (no request unless something is deleted) when it is synced; else by
        listing every kind, which is done only when the rendered set changed since the last
        pass of this process.
        """
        cached = None if self.cache is None else self.cache.tracked(tenant.namespace, tenant.name)
        if cached is None and self._rendered.get(key) == refs:
            return
        # The CronJob's name never changes, so it never needs pruning: no GET for it here.
        tracked = await self.tracked(tenant, cronjob, gateway_namespace, cronjob_by_name=False)
        pruned = await self.applier.prune(tracked, set(refs))
        if pruned:
            log.info("maastenantconfig %s: pruned %s", key, ", ".join(pruned))
        self._rendered[key] = refs


def _has_gateway_ref(obj: Obj) -> bool:
    ref = (obj.get("status") or {}).get("gatewayRef") or {}
    return bool(ref.get("name") and ref.get("namespace"))


def config_key_for(tenant_namespace: str) -> Key:
    """The key of the config an AITenant owns in its tenant namespace."""
    return Key(tenant_namespace, contract.TENANT_CONFIG_NAME)


def owner_index_key(obj: Obj) -> list[str]:
    """Configs indexed by their owning AITenant (``<namespace>/<name>``); only
    ``default-tenant`` can belong to one."""
    if obj["metadata"].get("name") != contract.TENANT_CONFIG_NAME:
        return []
    annotations = annotations_of(obj)
    name = annotations.get(contract.ANNOTATION_AITENANT_NAME)
    namespace = annotations.get(contract.ANNOTATION_AITENANT_NAMESPACE)
    return [f"{namespace}/{name}"] if name and namespace else []


def platform_context_changed(old: Obj | None, new: Obj) -> bool:
    """An AITenant change the platform renders from: status.gatewayRef. (spec.oidc is read
    by the MaaSAuthPolicy controller for the Gateway AuthPolicy, not by the platform.)"""
    if old is None:
        return True
    return (old.get("status") or {}).get("gatewayRef") != (new.get("status") or {}).get(
        "gatewayRef"
    )


def config_changed(old: Obj | None, new: Obj) -> bool:
    """Config predicate: anything but a status-only update (our own writes land there)."""
    if old is None:
        return True
    old_meta, new_meta = old["metadata"], new["metadata"]
    return (
        old_meta.get("generation") != new_meta.get("generation")
        or old_meta.get("labels") != new_meta.get("labels")
        or old_meta.get("annotations") != new_meta.get("annotations")
        or old_meta.get("finalizers") != new_meta.get("finalizers")
        or old_meta.get("deletionTimestamp") != new_meta.get("deletionTimestamp")
    )


def tracked_config_key(obj: Obj) -> Key | None:
    """The config that rendered a platform object, from its tracking labels."""
    labels = labels_of(obj)
    namespace = labels.get(contract.LABEL_TENANT_NAMESPACE)
    if not namespace or not labels.get(contract.LABEL_TENANT_NAME):
        return None
    return config_key_for(namespace)
