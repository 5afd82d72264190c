"""What an informer event means to the controllers: predicates, index keys and the
event-to-key mappings that ``app.py`` wires to the informers' handlers. Pure functions of the
objects (and the settings), no I/O.

- ``aitenant`` controller: ``tenant_changed``; a config or Role names its AITenant through the
  owner annotations (``annotated_owner``); a Gateway through the ``gateway`` index.
- ``maastenantconfig`` controller: configs it serves (``in_scope``) or must strip a leftover
  finalizer from (``wanted``), on any change but a status-only one (``config_changed``); the
  owning AITenant's status.gatewayRef (``platform_context_changed``, ``owner_index_key``); a
  platform object's tracking labels (``tracked_config_key``).
"""

from __future__ import annotations

from aitenant import contract
from aitenant.reconcilers import conditions
from aitenant.resources import Obj, annotations_of, labels_of
from aitenant.runtime.controller import Key
from aitenant.runtime.informer import EventType
from aitenant.settings import Settings

GATEWAY_INDEX = "gateway"
CONFIG_OWNER_INDEX = "owner"
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
    if labels_of(config).get(contract.LABEL_MANAGED_BY_AITENANT) != "true":
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


def owner_index_key(obj: Obj) -> list[str]:
    """Configs indexed by their owning AITenant (``<namespace>/<name>``); only
    ``default-tenant`` can belong to one."""
    if obj["metadata"].get("name") != contract.TENANT_CONFIG_NAME:
        return []
    owner = annotated_owner(obj)
    return [f"{owner.namespace}/{owner.name}"] if owner is not None else []


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
    labels = labels_of(obj)
    namespace = labels.get(contract.LABEL_TENANT_NAMESPACE)
    if not namespace or not labels.get(contract.LABEL_TENANT_NAME):
        return None
    return config_key_for(namespace)
