"""Which MaasTenantConfigs this controller serves, and which it only strips a leftover
finalizer from: read by its reconciler and by its event handlers (``setup.py``)."""

from __future__ import annotations

from aitenant import contract
from aitenant.resources import Obj, labels_of
from aitenant.settings import Settings


def in_scope(config: Obj, settings: Settings) -> bool:
    """A config this reconciler serves: only ``default-tenant``, whatever the labels of any
    other (a tenant has exactly one config; another one copying its labels is not it)."""
    meta = config["metadata"]
    if meta.get("name") != contract.TENANT_CONFIG_NAME:
        return False
    # A config we serve keeps our finalizer: a tenant admin who takes the label off does not
    # take it out of its cleanup (the label is put back, and identity never reads it). In
    # --maas-subscription-namespace the label alone decides (``has_leftover_finalizer``).
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
    ``--maas-subscription-namespace`` (that config's platform is never torn down per config).
    Without this it could never finish deleting."""
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
