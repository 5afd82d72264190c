"""The default tenant: ``Config/default`` and ``AITenant/models-as-a-service``, a leader-only
loop run at start, every 30 s and on ``wake()`` (``setup.py`` says on which events). Each tick
carries out ``plan_bootstrap``'s decision table: docs/contract.md §4.1 and §4.2, docs/differences.md
D7 and D13."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from aitenant import contract
from aitenant.controllers import conditions
from aitenant.controllers import legacy_tenant as legacy
from aitenant.resources import AITenant, Config, LegacyTenant, MaasTenantConfig
from aitenant.runtime.client.api_errors import already_exists, api_message, is_conflict
from aitenant.runtime.client.requests import get_or_none
from aitenant.settings import Settings

log = logging.getLogger(__name__)

Obj = dict[str, Any]
BOOTSTRAP_INTERVAL = 30.0
CONFLICT_RETRY = 0.2


@dataclass(frozen=True)
class BootstrapPlan:
    """What one tick does; ``note`` says why, for the log and the tests."""

    create_config: bool = False
    create_tenant: bool = False
    link_tenant: bool = False
    mark: bool = False
    note: str = ""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def is_config_ref(ref: Mapping[str, Any]) -> bool:
    """An ownerReference to ``Config/default`` (any version of our API group)."""
    group = str(ref.get("apiVersion") or "").split("/")[0]
    return (
        group == contract.GROUP
        and ref.get("kind") == "Config"
        and ref.get("name") == contract.CONFIG_NAME
    )


def config_ref_state(obj: Mapping[str, Any], config_uid: str) -> str:
    """``"missing"``, ``"current"`` (points at this Config) or ``"stale"`` (an earlier one)."""
    refs = [r for r in _meta(obj).get("ownerReferences") or [] if is_config_ref(r)]
    if not refs:
        return "missing"
    return "current" if any(r.get("uid") == config_uid for r in refs) else "stale"


def config_owner_reference(config: Mapping[str, Any]) -> dict[str, str]:
    """Non-controller, no blockOwnerDeletion: the Config anchors, it does not control."""
    return {
        "apiVersion": contract.API_VERSION,
        "kind": "Config",
        "name": contract.CONFIG_NAME,
        "uid": str(_meta(config).get("uid") or ""),
    }


def is_bootstrapped(config: Mapping[str, Any]) -> bool:
    annotations = _meta(config).get("annotations") or {}
    return annotations.get(contract.ANNOTATION_DEFAULT_BOOTSTRAPPED) == "true"


def config_is_live(config: Mapping[str, Any]) -> bool:
    """Not being deleted and has a UID: something ownerReferences can point at."""
    meta = _meta(config)
    return not meta.get("deletionTimestamp") and bool(meta.get("uid"))


def tenant_is_ready(tenant: Mapping[str, Any]) -> bool:
    """Live, not Terminating, and Ready=True: the moment the bootstrap counts as done."""
    status = tenant.get("status") or {}
    cond = conditions.find_condition(status, contract.CONDITION_READY)
    return (
        not _meta(tenant).get("deletionTimestamp")
        and status.get("phase") != contract.PHASE_TERMINATING
        and cond is not None
        and cond.get("status") == "True"
    )


def plan_bootstrap(
    config: Mapping[str, Any] | None, tenant: Mapping[str, Any] | None
) -> BootstrapPlan:
    """The decision table of docs/contract.md §4.1 (with docs/differences.md D7 and the
    stale-reference rule above)."""
    if config is None:
        return BootstrapPlan(create_config=True, note="Config/default is missing")
    config_meta = _meta(config)
    if config_meta.get("deletionTimestamp"):
        return BootstrapPlan(note="Config/default is being deleted")
    uid = str(config_meta.get("uid") or "")
    if not uid:
        return BootstrapPlan(note="Config/default has no UID yet")
    if tenant is None:
        if is_bootstrapped(config):
            return BootstrapPlan(note="default AITenant was deleted after bootstrap; not recreated")
        return BootstrapPlan(create_tenant=True, note="default AITenant is missing")
    if (
        _meta(tenant).get("deletionTimestamp")
        or (tenant.get("status") or {}).get("phase") == contract.PHASE_TERMINATING
    ):
        return BootstrapPlan(note="default AITenant is being deleted")
    ref = config_ref_state(tenant, uid)
    if ref == "stale":
        return BootstrapPlan(note="default AITenant belongs to an earlier Config/default")
    ready = tenant_is_ready(tenant)
    mark = ready and not is_bootstrapped(config)
    note = "default AITenant is Ready" if ready else "waiting for the default AITenant to be Ready"
    return BootstrapPlan(link_tenant=ref == "missing", mark=mark, note=note)


def default_tenant_body(
    *,
    config: Mapping[str, Any],
    aitenant_namespace: str,
    gateway_name: str,
    legacy_tenant: Mapping[str, Any] | None,
    gateway_namespace: str = "",
) -> Obj:
    """The default AITenant as created: gateway name and OIDC from a legacy Tenant if any.

    A legacy gateway name is kept even when its namespace differs from ``--gateway-namespace``,
    so that the mismatch surfaces as ``LegacyTenantMigrationFailed`` instead of silently moving
    the tenant to the flag's Gateway.
    """
    spec: Obj = {"gateway": {"name": gateway_name}}
    if legacy_tenant is not None:
        # OIDC settings the AITenant would refuse are left out: the create succeeds and the
        # tenant then reports why its legacy Tenant cannot be migrated.
        oidc = legacy.migratable_oidc(legacy_tenant, gateway_namespace)
        if oidc is not None:
            spec["oidc"] = oidc
        _, legacy_name = legacy.legacy_gateway(legacy_tenant)
        if legacy_name:
            spec["gateway"] = {"name": legacy_name}
    return {
        "apiVersion": contract.API_VERSION,
        "kind": "AITenant",
        "metadata": {
            "name": contract.DEFAULT_TENANT_NAME,
            "namespace": aitenant_namespace,
            # Kept by `juju remove-application` (docs/design.md §7.1).
            "labels": dict(contract.KEPT_BY_JUJU_LABELS),
            "ownerReferences": [config_owner_reference(config)],
        },
        "spec": spec,
    }


def link_patch(obj: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Merge patch appending the Config ownerReference (whole list, resourceVersion-guarded)."""
    meta = _meta(obj)
    refs = [dict(r) for r in meta.get("ownerReferences") or []]
    refs.append(config_owner_reference(config))
    return {"metadata": {"ownerReferences": refs, "resourceVersion": meta.get("resourceVersion")}}


class DefaultTenantBootstrap:
    """Leader-only loop; see the module docstring. ``tick()`` is one pass, for tests too."""

    def __init__(
        self, *, client: AsyncClient, settings: Settings, interval: float = BOOTSTRAP_INTERVAL
    ) -> None:
        self.client = client
        self.settings = settings
        self.interval = interval
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                if is_conflict(exc):
                    # An object changed under us: decide again on fresh reads, shortly.
                    log.debug("default tenant bootstrap: %s; retrying", api_message(exc))
                    await asyncio.sleep(CONFLICT_RETRY)
                    continue
                log.warning("default tenant bootstrap: %s", api_message(exc))
            except Exception as exc:  # the loop must outlive any one failure
                log.warning("default tenant bootstrap: %s", api_message(exc))
            # asyncio.timeout, not wait_for: Python 3.11's wait_for loses a cancellation that
            # arrives as the wake-up does, and the loop then outlives its manager's stop (the
            # bootstrap's own writes wake it, so a stop right after one hung for good).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self._wake.wait()

    async def tick(self) -> BootstrapPlan:
        s = self.settings
        config = await self._get(Config, contract.CONFIG_NAME)
        tenant = await self._get(AITenant, contract.DEFAULT_TENANT_NAME, s.aitenant_namespace)
        plan = plan_bootstrap(config, tenant)
        if plan.create_config:
            config = await self.create_config()
            plan = plan_bootstrap(config, tenant)
        log.debug("default tenant bootstrap: %s", plan.note)
        if config is None:
            return plan
        if plan.create_tenant:
            await self.create_tenant(config)
        if plan.link_tenant and tenant is not None:
            await self._link(AITenant, tenant, config)
        if plan.mark:
            await self.mark(config)
        if config_is_live(config):
            await self.link_tenant_config(config)
        return plan

    async def create_config(self) -> Obj:
        body = {
            "apiVersion": contract.API_VERSION,
            "kind": "Config",
            # Kept by `juju remove-application` (docs/design.md §7.1).
            "metadata": {
                "name": contract.CONFIG_NAME,
                "labels": dict(contract.KEPT_BY_JUJU_LABELS),
            },
            "spec": {},
        }
        try:
            created = dict(await self.client.create(Config.from_dict(body)))
            log.info("created Config/%s", contract.CONFIG_NAME)
            return created
        except ApiError as exc:
            if not already_exists(exc):
                raise
        return dict(await self.client.get(Config, contract.CONFIG_NAME))

    async def create_tenant(self, config: Obj) -> None:
        s = self.settings
        legacy_tenant = await self._get(
            LegacyTenant, contract.LEGACY_TENANT_NAME, s.maas_subscription_namespace
        )
        body = default_tenant_body(
            config=config,
            aitenant_namespace=s.aitenant_namespace,
            gateway_name=s.gateway_name,
            legacy_tenant=legacy_tenant,
            gateway_namespace=s.gateway_namespace,
        )
        try:
            await self.client.create(AITenant.from_dict(body))
        except ApiError as exc:
            if is_conflict(exc):
                return
            raise
        log.info(
            "created AITenant %s/%s (gateway %s%s)",
            s.aitenant_namespace,
            contract.DEFAULT_TENANT_NAME,
            body["spec"]["gateway"]["name"],
            ", from legacy Tenant" if legacy_tenant is not None else "",
        )

    async def mark(self, config: Obj) -> None:
        patch = {"metadata": {"annotations": {contract.ANNOTATION_DEFAULT_BOOTSTRAPPED: "true"}}}
        await self.client.patch(Config, contract.CONFIG_NAME, patch, patch_type=PatchType.MERGE)
        log.info("default AITenant is Ready; Config/%s marked bootstrapped", contract.CONFIG_NAME)

    async def link_tenant_config(self, config: Obj) -> None:
        """Config ownerReference on MaasTenantConfig/default-tenant of the default tenant."""
        ns = self.settings.maas_subscription_namespace
        tenant_config = await self._get(MaasTenantConfig, contract.TENANT_CONFIG_NAME, ns)
        if tenant_config is None or _meta(tenant_config).get("deletionTimestamp"):
            return
        uid = str(_meta(config).get("uid") or "")
        if config_ref_state(tenant_config, uid) == "missing":
            await self._link(MaasTenantConfig, tenant_config, config)

    async def _link(self, resource: Any, obj: Obj, config: Obj) -> None:
        meta = _meta(obj)
        await self.client.patch(
            resource,
            meta["name"],
            link_patch(obj, config),
            namespace=meta.get("namespace"),
            patch_type=PatchType.MERGE,
        )
        log.info(
            "%s %s/%s: ownerReference to Config/%s added",
            obj.get("kind", resource.__name__),
            meta.get("namespace"),
            meta["name"],
            contract.CONFIG_NAME,
        )

    async def _get(self, resource: Any, name: str, namespace: str | None = None) -> Obj | None:
        obj = await get_or_none(self.client, resource, name, namespace)
        return None if obj is None else dict(obj)
