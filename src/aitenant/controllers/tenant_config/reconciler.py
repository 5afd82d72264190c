"""MaasTenantConfig reconciler: the tenant's maas-api platform (docs/contract.md §3.6, §5.4;
docs/differences.md D5, D6, D9). ``_reconcile_live`` is a pass over a live config in scope, its
steps in order; which configs are in scope is ``scope.py``; whether maas-api is rolled out,
and why not, is ``readiness.py``.

Live copies come from the platform cache, so reconciling an unchanged tenant reads two objects
(the DB Secret and the CronJob) and writes nothing. Transient API answers (409, 429, 5xx) are
retried with backoff, without a status; a new tenant's first status waits for its first rollout
(about a second) so it goes straight to Ready instead of Pending-then-Ready. A deleting config is
handed to ``cleanup`` (``cleanup.ConfigCleanup``).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Pod, Secret

from aitenant import certificates, contract, naming
from aitenant.controllers import conditions
from aitenant.controllers.finalizers import ensure_finalizer
from aitenant.controllers.status import StatusWriter
from aitenant.controllers.tenant_config.cleanup import remove_finalizer
from aitenant.controllers.tenant_config.readiness import (
    FirstRollout,
    FirstRollouts,
    deployment_available,
    pod_problem,
    rolled_out_with,
)
from aitenant.controllers.tenant_config.scope import has_leftover_finalizer, in_scope
from aitenant.controllers.tenant_config.spec import (
    check_identity,
    max_expiration_days,
    refuse_replicas,
    replicas_for,
    telemetry_of,
)
from aitenant.errors import StepFailed, after_failure
from aitenant.platform import kinds
from aitenant.platform.apply import Applier, ApplyError, ApplyReport, is_unmanaged
from aitenant.platform.cache import PlatformCache
from aitenant.platform.discovery import ApiDiscovery
from aitenant.platform.prune import Tenant, TrackedObjects
from aitenant.platform.render import (
    Manifest,
    PlatformContext,
    PlatformNames,
    RenderError,
    Telemetry,
    names_for,
    render,
)
from aitenant.resources import (
    AITenant,
    AITenantView,
    Gateway,
    MaasTenantConfig,
    Obj,
)
from aitenant.runtime.cache.reads import CachedReads
from aitenant.runtime.client.requests import LIST_PAGE
from aitenant.runtime.control.controller import Done, Key, RequeueAfter, Result
from aitenant.settings import Settings

log = logging.getLogger(__name__)

Reason = contract.ConfigReason

REQUEUE_NOT_AVAILABLE = 30.0
REQUEUE_FIRST_ROLLOUT = 2.0
# Once Ready: look again now and then (drift of kinds we do not watch, certificate renewal).
RESYNC_READY = 300.0
DB_URL_KEY = "DB_CONNECTION_URL"

# The cleanup of a deleting config (``cleanup.ConfigCleanup``), as the AITenant
# reconciler's ``Finalize``.
Cleanup = Callable[[Key, Obj], Awaitable[Result]]


class TenantConfigReconciler:
    def __init__(
        self,
        *,
        client: AsyncClient,
        settings: Settings,
        get_config: Callable[[str, str], Obj | None],
        get_tenant: Callable[[str, str], Obj | None],
        remember: Callable[[Obj], None],
        reads: CachedReads,
        discovery: ApiDiscovery,
        cache: PlatformCache,
        applier: Applier,
        tracked: TrackedObjects,
        cleanup: Cleanup,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.client = client
        self.settings = settings
        # The informer's copies, or the newer one our last write returned (``remember``).
        self.get_config = get_config
        self.get_tenant = get_tenant
        self.remember = remember
        # The Gateway, the DB Secret and the AITenant when its informer copy is behind.
        self.reads = reads
        self.discovery = discovery
        self.cache = cache
        # What the platform is written and pruned through, shared with ``cleanup``.
        self.applier = applier
        self.tracked = tracked
        # A deleting config in scope is handed to it (``cleanup.ConfigCleanup``).
        self.cleanup = cleanup
        self.ca = certificates.CALoader(settings.maas_api_ca_file, settings.maas_api_ca_key_file)
        self.certs = certificates.ServingCerts(self.ca, settings.effective_infra_namespace, now)
        # The config generation the user-metrics privacy warning was last logged for.
        self._warned_user_metrics: dict[Key, int] = {}
        self.first_rollouts = FirstRollouts(REQUEUE_FIRST_ROLLOUT)

    async def reconcile(self, key: Key) -> Result:
        config = self.get_config(key.namespace, key.name)
        if config is None:
            self.tracked.forget(key)
            self.first_rollouts.end(key)
            return Done()
        if not in_scope(config, self.settings):
            if has_leftover_finalizer(config, self.settings):
                # The only write for a config we do not serve; nothing is deleted for it.
                await remove_finalizer(self.client, config, self.remember)
                log.info(
                    "maastenantconfig %s: not a tenant's config; removed leftover finalizer %s",
                    key,
                    contract.TENANT_CONFIG_FINALIZER,
                )
            return Done()
        meta = config["metadata"]
        if meta.get("deletionTimestamp"):
            return await self.cleanup(key, config)
        started = time.perf_counter()
        config = await ensure_finalizer(
            self.client, MaasTenantConfig, config, contract.TENANT_CONFIG_FINALIZER, self.remember
        )
        generation = int(config["metadata"].get("generation") or 0)
        status = StatusWriter(
            self.client, MaasTenantConfig, config, generation, self.remember, events=None
        )
        status.status["infraNamespace"] = self.settings.effective_infra_namespace
        try:
            result = await self._reconcile_live(key, config, status)
        except FirstRollout as rollout:
            return RequeueAfter(rollout.seconds_left)
        except StepFailed as failure:
            status.set_phase(failure.phase, failure.reason, failure.message)
            await status.flush()
            log.info("maastenantconfig %s: %s: %s", key, failure.reason, failure.message)
            return after_failure(failure)
        await status.flush()
        log.debug(
            "maastenantconfig %s: %s in %.0f ms",
            key,
            conditions.ready_reason(status.status),
            (time.perf_counter() - started) * 1000,
        )
        return result

    async def _reconcile_live(self, key: Key, config: Obj, status: StatusWriter) -> Result:
        owner = await self.owner_of(config)
        tenant = Tenant(check_identity(config, owner), config["metadata"]["namespace"])
        gw_namespace, gw_name = await self.platform_context(owner)
        telemetry = telemetry_of(config)
        await self.check_inputs(telemetry)
        names = names_for(tenant.name, gw_name, self.settings.gateway_name)
        replicas = replicas_for(
            config, self.settings.maas_api_replicas, self.settings.maas_api_max_replicas
        )
        infra = self.settings.effective_infra_namespace
        cert_secret = await self.cache.read(kinds.SECRET, infra, names.serving_cert)
        serving = self.serving_cert(cert_secret, names.api)
        backend_ca = await self.backend_ca(serving, names)
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
            replicas=replicas.count,
            serving_cert=serving,
            max_expiration_days=max_expiration_days(config),
            telemetry=telemetry,
            backend_ca_pem=backend_ca,
            authorino_namespaces=self.settings.authorino_namespaces,
            controller_pod_labels=self.settings.controller_pods,
            gateway_pod_labels=self.settings.gateway_pods,
        )
        if telemetry is not None and telemetry.user:
            self.warn_user_metrics(key, status.generation)
        rendered = self.render(ctx)
        report = await self.apply(key, rendered)
        await self.prune(key, tenant, rendered, gw_namespace)
        if report.writes:
            log.info(
                "maastenantconfig %s: applied %s; created %s",
                key,
                ", ".join(report.applied) or "-",
                ", ".join(report.created) or "-",
            )
        refuse_replicas(replicas)
        return await self.rollout_readiness(key, report, names, status)

    # -- steps ---------------------------------------------------------------------------------
    async def owner_of(self, config: Obj) -> AITenantView:
        """The AITenant whose tenant namespace holds the config: found from the namespace and
        the AITenant's status.tenantNamespace (facts only a platform administrator and the
        controller write), never from the config's own labels or annotations."""
        namespace = config["metadata"]["namespace"]
        aitenant_namespace = self.settings.aitenant_namespace
        names = naming.tenants_for_namespace(namespace, self.settings.maas_subscription_namespace)
        for name in names:
            obj = self.get_tenant(aitenant_namespace, name)
            if obj is None or _tenant_namespace(obj) != namespace:
                # The informer may not have seen the AITenant's latest status yet.
                obj = await self.reads.get(AITenant, name, aitenant_namespace)
            if obj is not None and _tenant_namespace(obj) == namespace:
                return AITenantView(obj)
        expected = (
            f"AITenant {aitenant_namespace}/{names[0]} with status.tenantNamespace={namespace}"
            if names
            else f"a tenant namespace ({contract.TENANT_NAMESPACE_PREFIX}<name>)"
        )
        raise StepFailed(
            Reason.INVALID_TENANT_CONFIG,
            f"MaasTenantConfig {namespace}/{config['metadata']['name']} belongs to no AITenant: "
            f"expected {expected}",
        )

    async def platform_context(self, owner: AITenantView) -> tuple[str, str]:
        """The owning AITenant's Gateway (namespace, name), which must exist."""
        if not _has_gateway_ref(owner.obj):
            raise StepFailed(
                Reason.INVALID_GATEWAY,
                f"AITenant {owner.namespace}/{owner.name} status.gatewayRef is not ready",
            )
        ref = owner.status["gatewayRef"]
        gw_ns, gw_name = ref["namespace"], ref["name"]
        if await self.reads.get(Gateway, gw_name, gw_ns) is None:
            raise StepFailed(
                Reason.GATEWAY_NOT_READY,
                f"gateway {gw_ns}/{gw_name} not found: the specified Gateway must exist before "
                "enabling MaaS platform reconcile",
                phase=contract.PHASE_PENDING,
            )
        return gw_ns, gw_name

    async def check_inputs(self, telemetry: Telemetry | None) -> None:
        """Flags, served APIs and the DB Secret."""
        try:
            self.ca.load()
        except certificates.CAError as exc:
            raise StepFailed(Reason.MISSING_INPUT, str(exc)) from None
        await self.check_apis(telemetry)
        secret_name = self.settings.maas_api_db_secret
        infra = self.settings.effective_infra_namespace
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

    async def check_apis(self, telemetry: Telemetry | None) -> None:
        required = [kinds.HTTP_ROUTE, kinds.AUTH_POLICY, kinds.TOKEN_RATE_LIMIT_POLICY]
        if telemetry is not None:
            required.append(kinds.TELEMETRY_POLICY)
        missing = [k for k in required if not await self.discovery.serves(k)]
        if missing:
            listed = ", ".join(f"{k.kind} ({k.api_version})" for k in missing)
            raise StepFailed(
                Reason.DEPENDENCY_MISSING,
                f"the API server does not serve {listed}; install the CRDs first",
                phase=contract.PHASE_PENDING,
            )

    def serving_cert(self, secret: Obj | None, service: str) -> certificates.ServingCert:
        """The certificate to render: the live one while it is good, else a new one."""
        current = certificates.from_secret(secret)
        if secret is not None and is_unmanaged(secret):
            # Opted out: render what is there, so nothing else churns on its account.
            return current or certificates.ServingCert("", "", "")
        return self.certs.for_service(current, service)

    async def backend_ca(
        self, serving: certificates.ServingCert, names: PlatformNames
    ) -> str | None:
        """The CAs the Gateway is to trust for TLS to maas-api, or None where
        BackendTLSPolicy is not served. That is the ``ca.crt`` of the certificate maas-api
        serves: the charm's CA, unless the serving Secret is opted out and names another (one
        that names none falls back to the charm's); after a CA change, the CAs trusted before
        too, until every pod serves the new certificate (``gateway_trust_bundle``). Not a
        dependency: without the kind the config is still Ready, and such a Gateway needs TLS
        to maas-api set up its own way (docs/platform.md §11)."""
        if not await self.discovery.serves(kinds.BACKEND_TLS_POLICY):
            return None
        current = serving.ca_pem or self.ca.load().cert_pem
        infra = self.settings.effective_infra_namespace
        bundle = await self.cache.read(kinds.CONFIG_MAP, infra, names.backend_ca)
        trusted_before = ((bundle or {}).get("data") or {}).get(certificates.CA_CERT_KEY)
        if trusted_before is None or trusted_before == current:
            return current  # the usual case: nothing changed, nothing more to read
        deployment = await self.cache.read(kinds.DEPLOYMENT, infra, names.api)
        rolled_out = rolled_out_with(deployment, serving.pem_sha256)
        return certificates.gateway_trust_bundle(current, trusted_before, rolled_out=rolled_out)

    def render(self, ctx: PlatformContext) -> list[Manifest]:
        """The tenant's platform from the templates → RenderFailed."""
        try:
            return render(ctx)
        except RenderError as exc:
            raise StepFailed(Reason.RENDER_FAILED, str(exc)) from None

    async def apply(self, key: Key, manifests: list[Manifest]) -> ApplyReport:
        """Server-side apply of what differs from the live copies → ApplyFailed."""
        try:
            return await self.applier.apply_all(manifests, self.cached)
        except ApplyError as exc:
            raise self._apply_failed(key, exc) from None

    async def prune(
        self, key: Key, tenant: Tenant, manifests: list[Manifest], gateway_namespace: str
    ) -> None:
        """Delete the tenant's objects that were not rendered this time."""
        try:
            await self.tracked.prune(
                key, tenant, frozenset(m.ref for m in manifests), gateway_namespace
            )
        except ApplyError as exc:
            raise self._apply_failed(key, exc) from None

    def _apply_failed(self, key: Key, exc: ApplyError) -> Exception:
        self.tracked.forget(key)
        if exc.transient and exc.cause is not None:  # retried soon, with backoff; no status yet
            return exc.cause
        return StepFailed(Reason.APPLY_FAILED, str(exc))

    async def rollout_readiness(
        self, key: Key, report: ApplyReport, names: PlatformNames, status: StatusWriter
    ) -> Result:
        """Ready once the maas-api Deployment is Available at its generation; a new
        tenant's first rollout writes no waiting status for its window (``FirstRollouts``)."""
        infra = self.settings.effective_infra_namespace
        deployment = report.live.get(("apps", "Deployment", infra, names.api))
        if not deployment_available(deployment):
            if conditions.find_condition(status.status, contract.CONDITION_READY) is None:
                # A new tenant's first rollout: its Deployment's watch brings us back in a
                # moment, usually Available (one status write, not two).
                left = self.first_rollouts.seconds_left(key, wrote_platform=bool(report.writes))
                if left is not None:
                    raise FirstRollout(left)
            why = await self.why_unavailable(deployment)
            raise StepFailed(
                Reason.MAAS_API_NOT_AVAILABLE,
                f"waiting for Deployment {infra}/{names.api} to become available"
                + (f": {why}" if why else ""),
                phase=contract.PHASE_PENDING,
                requeue_after=REQUEUE_NOT_AVAILABLE,
            )
        self.first_rollouts.end(key)
        status.set_phase(
            contract.PHASE_ACTIVE, Reason.RECONCILED, contract.ConfigMessage.RECONCILED
        )
        return RequeueAfter(RESYNC_READY)

    async def why_unavailable(self, deployment: Obj | None) -> str | None:
        """What holds maas-api back, in the kubelet's words (docs/differences.md D15): the
        Deployment's ReplicaFailure, else the first pod whose container is not ready (one
        uncached list, only while the Deployment is not Available). None when nothing says."""
        if deployment is None:
            return None
        for cond in (deployment.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "ReplicaFailure" and cond.get("status") == "True":
                return f"{cond.get('reason')}: {cond.get('message')}"
        selector = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels")
        if not selector:
            return None
        try:
            pods = [
                p
                async for p in self.client.list(
                    Pod,
                    namespace=deployment["metadata"]["namespace"],
                    labels=selector,
                    chunk_size=LIST_PAGE,
                )
            ]
        except ApiError as exc:  # e.g. a Role of an older charm without pods: say nothing
            log.debug("maas-api pods of %s: %s", deployment["metadata"]["name"], exc)
            return None
        for pod in sorted(pods, key=lambda p: (p.metadata.name if p.metadata else None) or ""):
            if pod.metadata is None or pod.metadata.deletionTimestamp or pod.status is None:
                continue
            why = pod_problem(pod)
            if why:
                return f"pod {pod.metadata.name}: {why}"
        return None

    def warn_user_metrics(self, key: Key, generation: int) -> None:
        """The privacy warning when user identities go into metrics (docs/contract.md §3.6);
        once per generation of the config, not on every pass."""
        if self._warned_user_metrics.get(key) == generation:
            return
        self._warned_user_metrics[key] = generation
        log.warning(
            "maastenantconfig %s: spec.telemetry.metrics.captureUser is on: usage metrics record "
            "user identities (personal data); make sure that complies with your privacy rules "
            "(GDPR)",
            key,
        )

    # -- helpers -------------------------------------------------------------------------------
    def cached(self, manifest: Manifest) -> Any:
        """``Lookup`` for the applier: the informer's copy, or UNKNOWN (read the API)."""
        return self.cache.get(
            manifest.kind, manifest.namespace, manifest.name, unlabelled=manifest.create_only
        )


def _tenant_namespace(obj: Obj) -> str | None:
    return (obj.get("status") or {}).get("tenantNamespace")


def _has_gateway_ref(obj: Obj) -> bool:
    ref = (obj.get("status") or {}).get("gatewayRef") or {}
    return bool(ref.get("name") and ref.get("namespace"))
