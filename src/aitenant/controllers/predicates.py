"""What an informer event means to the controllers: predicates, index keys, and the handlers
that turn events into queued keys. The predicates are pure functions of the objects (and the
settings); the handlers (``requeue_aitenants``, ``requeue_configs``, ``wake_bootstrap``) only
enqueue, no I/O. ``app`` calls each once, before the informers start.

- ``aitenant`` controller: ``tenant_changed``, or a status someone else wrote
  (``status_overwritten``); a config through its namespace (``owners_of_config``), a Role
  through the owner annotations (``annotated_owner``); a Gateway, and a claim on it going,
  through the ``gateway`` index.
- ``maastenantconfig`` controller: configs it serves (``in_scope``) or must strip a leftover
  finalizer from (``wanted``), on any change but a status-only one of ours (``config_changed``,
  ``status_overwritten``); the
  owning AITenant's status.gatewayRef (``platform_context_changed``, ``config_key_of_tenant``); a
  platform object's tracking labels (``tracked_config_key``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from aitenant import contract, naming
from aitenant.platform.apply import tenant_of
from aitenant.controllers import conditions
from aitenant.resources import Obj, annotations_of, labels_of
from aitenant.runtime.controller import Key
from aitenant.runtime.informer import EventType, Handler
from aitenant.settings import Settings

if TYPE_CHECKING:
    from aitenant.platform.cache import PlatformCache
    from aitenant.controllers.default_tenant.bootstrap import DefaultTenantBootstrap
    from aitenant.runtime.controller import Controller
    from aitenant.runtime.informer import Informer

GATEWAY_INDEX = "gateway"
CLAIM_OWNER_INDEX = "claim-owner"


# -- AITenant --------------------------------------------------------------------------------
def claim_owner_names(obj: Obj) -> list[str]:
    """Index of claim ConfigMaps: every AITenant name ``claim_owned_by`` may find in one (its
    controller ownerReference, its owner annotation)."""
    meta = obj.get("metadata") or {}
    names = {
        ref.get("name")
        for ref in meta.get("ownerReferences") or []
        if ref.get("controller") and ref.get("kind") == "AITenant"
    }
    names.add((meta.get("annotations") or {}).get(contract.ANNOTATION_AITENANT_NAME))
    return sorted(name for name in names if name)


def gateway_index_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def tenant_changed(event: EventType, old: Obj | None, new: Obj) -> bool:
    """AITenant predicate: create, delete, generation change, deletionTimestamp newly set."""
    if event != "MODIFIED" or old is None:
        return True
    old_meta, new_meta = old["metadata"], new["metadata"]
    return old_meta.get("generation") != new_meta.get("generation") or (
        bool(new_meta.get("deletionTimestamp")) and not old_meta.get("deletionTimestamp")
    )


def status_overwritten(event: EventType, old: Obj | None, new: Obj, *, ours: bool) -> bool:
    """AITenant and config predicate: someone else changed the status (``ours``: the informer
    knows this version for one of our own writes). The status is entirely ours, so the object
    is reconciled at once and the status put right; our own status writes bring nothing back."""
    if event != "MODIFIED" or old is None or ours:
        return False
    return (old.get("status") or {}) != (new.get("status") or {})


def settled(event: EventType, obj: Obj) -> bool:
    """Seen in a (re)list already Ready at its generation: probably nothing to do, so it
    waits behind the objects that have work (the work queue's low priority)."""
    return (
        event == "ADDED"
        and not obj["metadata"].get("deletionTimestamp")
        and conditions.is_ready(obj)
    )


def annotated_owner(obj: Obj) -> Key | None:
    """The AITenant named by an object's owner annotations (configs, Roles)."""
    ann = annotations_of(obj)
    name = ann.get(contract.ANNOTATION_AITENANT_NAME)
    namespace = ann.get(contract.ANNOTATION_AITENANT_NAMESPACE)
    return Key(namespace, name) if name and namespace else None


# -- MaasTenantConfig ------------------------------------------------------------------------
def in_scope(config: Obj, settings: Settings) -> bool:
    """A config this reconciler serves: only ``default-tenant``, whatever the labels of any
    other (a tenant has exactly one config; another one copying its labels is not it)."""
    meta = config["metadata"]
    if meta.get("name") != contract.TENANT_CONFIG_NAME:
        return False
    # A config we serve keeps our finalizer: a tenant admin who takes the label off does not
    # take it out of its cleanup (the label is put back, and identity never reads it). In
    # --maas-subscription-namespace the label alone decides, as upstream (``has_leftover_...``).
    labelled = labels_of(config).get(contract.LABEL_MANAGED_BY_AITENANT) == "true"
    served = contract.TENANT_CONFIG_FINALIZER in (meta.get("finalizers") or [])
    if not labelled and not (
        served and meta.get("namespace") != settings.maas_subscription_namespace
    ):
        return False
    if settings.enable_tenant_namespace_discovery:
        return True
    return meta.get("namespace") == settings.maas_subscription_namespace


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


def config_key_for(tenant_namespace: str) -> Key:
    """The key of the config an AITenant owns in its tenant namespace."""
    return Key(tenant_namespace, contract.TENANT_CONFIG_NAME)


def config_key_of_tenant(tenant: Obj, settings: Settings) -> Key:
    """The key of an AITenant's config: ``default-tenant`` in its tenant namespace (the one its
    status records, else the one its name derives)."""
    namespace = (tenant.get("status") or {}).get("tenantNamespace") or naming.tenant_namespace_for(
        tenant["metadata"]["name"], settings.maas_subscription_namespace
    )
    return config_key_for(namespace)


def owners_of_config(config: Obj, settings: Settings) -> list[Key]:
    """The AITenants a config's namespace can belong to (``naming.tenants_for_namespace``):
    never the ones its annotations name, which its tenant admin may write."""
    meta = config["metadata"]
    if meta.get("name") != contract.TENANT_CONFIG_NAME:
        return []
    names = naming.tenants_for_namespace(meta["namespace"], settings.maas_subscription_namespace)
    return [Key(settings.aitenant_namespace, name) for name in names]


def platform_context_changed(old: Obj | None, new: Obj) -> bool:
    """An AITenant change the platform renders from: status.gatewayRef. (spec.oidc is read
    by the MaaSAuthPolicy controller for the Gateway AuthPolicy, not by the platform.)"""
    if old is None:
        return True
    return (old.get("status") or {}).get("gatewayRef") != (new.get("status") or {}).get(
        "gatewayRef"
    )


def tracked_config_key(obj: Obj) -> Key | None:
    """The config that rendered a platform object, from its tracking labels."""
    owner = tenant_of(obj)
    if not owner or not all(owner):
        return None
    return config_key_for(owner[1])


# -- handlers: informer events → queued keys -------------------------------------------------
class TenantsByGateway:
    """The AITenants using a Gateway, from the AITenant informer's ``gateway`` index: asked by
    the Gateway handlers below and by the admission webhook (``validators.GatewayIndex``)."""

    def __init__(self, tenants: Informer) -> None:
        self.tenants = tenants

    def has_synced(self) -> bool:
        return self.tenants.synced.is_set()

    def tenants_for_gateway(self, namespace: str, name: str) -> list[tuple[str, str]]:
        return [
            (o["metadata"]["namespace"], o["metadata"]["name"])
            for o in self.tenants.by_index(GATEWAY_INDEX, gateway_index_key(namespace, name))
        ]


class Watched(Protocol):
    """The caches the handlers are added to (``app.caches.Caches``)."""

    @property
    def tenants(self) -> Informer: ...
    @property
    def configs(self) -> Informer: ...
    @property
    def gateways(self) -> Informer: ...
    @property
    def roles(self) -> Informer: ...
    @property
    def claims(self) -> Informer: ...
    @property
    def db_secret(self) -> Informer: ...
    @property
    def platform(self) -> PlatformCache: ...
    @property
    def config_anchor(self) -> Informer | None: ...
    @property
    def by_gateway(self) -> TenantsByGateway: ...


def requeue_aitenants(controller: Controller, caches: Watched, settings: Settings) -> None:
    """Queue an AITenant when it changes (``tenant_changed``) or someone else writes its status
    (``status_overwritten``), when its config or one of its Roles does (their owner
    annotations), when its Gateway is created, deleted or given a new generation, and when the
    claim on its Gateway goes (a tenant refused because another one held the Gateway takes it
    now, not at its next 30 s retry)."""

    def on_tenant(event: EventType, old: Obj | None, new: Obj) -> None:
        if tenant_changed(event, old, new) or status_overwritten(
            event, old, new, ours=caches.tenants.ours(new)
        ):
            meta = new["metadata"]
            controller.enqueue(
                Key(meta["namespace"], meta["name"]), low_priority=settled(event, new)
            )

    def on_config(event: EventType, old: Obj | None, new: Obj) -> None:
        # Only default-tenant is a tenant's config; another one copying its labels and
        # annotations concerns neither the AITenant nor the platform. Its owner puts back
        # what a tenant admin changed of our labels and annotations.
        for key in owners_of_config(new, settings):
            controller.enqueue(key, low_priority=settled(event, new))

    def on_role(event: EventType, old: Obj | None, new: Obj) -> None:
        # A tenant-admin Role edited or deleted by someone else: restore it now.
        if event != "ADDED" and (key := annotated_owner(new)) is not None:
            controller.enqueue(key)

    def on_gateway(event: EventType, old: Obj | None, new: Obj) -> None:
        if (
            event == "MODIFIED"
            and old is not None
            and old["metadata"].get("generation") == new["metadata"].get("generation")
        ):
            return
        meta = new["metadata"]
        for namespace, name in caches.by_gateway.tenants_for_gateway(
            meta["namespace"], meta["name"]
        ):
            controller.enqueue(Key(namespace, name))

    def on_claim(event: EventType, old: Obj | None, new: Obj) -> None:
        data = new.get("data") or {}
        if event == "DELETED" and data.get("gatewayNamespace") and data.get("gatewayName"):
            for namespace, name in caches.by_gateway.tenants_for_gateway(
                data["gatewayNamespace"], data["gatewayName"]
            ):
                controller.enqueue(Key(namespace, name))

    caches.tenants.add_handler(on_tenant)
    caches.configs.add_handler(on_config)
    caches.gateways.add_handler(on_gateway)
    caches.roles.add_handler(on_role)
    caches.claims.add_handler(on_claim)


def requeue_configs(controller: Controller, caches: Watched, settings: Settings) -> None:
    """Queue a MaasTenantConfig when it changes (``wanted``, ``config_changed``; a status only
    when someone else wrote it, ``status_overwritten``) and when what
    its platform is rendered from does: the owning AITenant's status.gatewayRef, its Gateway
    appearing or going, any of its platform objects (the Deployment turning Available, a
    user's edit, a deletion), and the database Secret every maas-api reads. An AITenant's
    config is found by its tenant namespace (``config_key_of_tenant``)."""

    def enqueue_config_of(tenant: Obj | None) -> None:
        if tenant is None:
            return
        key = config_key_of_tenant(tenant, settings)
        config = caches.configs.get(key.namespace, key.name)
        if config is not None and in_scope(config, settings):
            controller.enqueue(key)

    def on_config(event: EventType, old: Obj | None, new: Obj) -> None:
        if wanted(new, settings) and (
            event == "DELETED"
            or config_changed(old, new)
            or status_overwritten(event, old, new, ours=caches.configs.ours(new))
        ):
            meta = new["metadata"]
            controller.enqueue(
                Key(meta["namespace"], meta["name"]), low_priority=settled(event, new)
            )

    def on_tenant(event: EventType, old: Obj | None, new: Obj) -> None:
        if event == "DELETED" or platform_context_changed(old, new):
            enqueue_config_of(new)

    def on_gateway(event: EventType, old: Obj | None, new: Obj) -> None:
        if event == "MODIFIED":
            return  # the platform needs the Gateway to exist, nothing more
        meta = new["metadata"]
        for namespace, name in caches.by_gateway.tenants_for_gateway(
            meta["namespace"], meta["name"]
        ):
            enqueue_config_of(caches.tenants.get(namespace, name))

    def on_platform_object(event: EventType, old: Obj | None, new: Obj) -> None:
        if (key := tracked_config_key(new)) is not None:
            controller.enqueue(key)

    def on_db_secret(event: EventType, old: Obj | None, new: Obj) -> None:
        # Every tenant's maas-api reads it: one that waited for it goes on at once.
        for config in caches.configs.list():
            if in_scope(config, settings):
                meta = config["metadata"]
                controller.enqueue(Key(meta["namespace"], meta["name"]), low_priority=True)

    caches.configs.add_handler(on_config)
    caches.db_secret.add_handler(on_db_secret)
    caches.tenants.add_handler(on_tenant)
    caches.gateways.add_handler(on_gateway)
    caches.platform.add_handler(on_platform_object)


def wake_bootstrap(bootstrap: DefaultTenantBootstrap, caches: Watched, settings: Settings) -> None:
    """Wake the default-tenant bootstrap on events of the objects it decides on: Config/default,
    the default AITenant and its MaasTenantConfig (without the Config's informer, the latter
    two only)."""

    def wake_on(namespace: str, name: str) -> Handler:
        def handler(event: EventType, old: Obj | None, new: Obj) -> None:
            meta = new["metadata"]
            if (meta.get("namespace") or "", meta["name"]) == (namespace, name):
                bootstrap.wake()

        return handler

    if caches.config_anchor is not None:
        caches.config_anchor.add_handler(wake_on("", contract.CONFIG_NAME))
    caches.tenants.add_handler(wake_on(settings.aitenant_namespace, contract.DEFAULT_TENANT_NAME))
    caches.configs.add_handler(
        wake_on(settings.maas_subscription_namespace, contract.TENANT_CONFIG_NAME)
    )
