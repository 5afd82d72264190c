"""Migration from a legacy ``Tenant/default-tenant`` (docs/contract.md §6): the pure decisions,
shared by the AITenant reconciler (``aitenant/legacy_migration.py`` does its I/O) and the
default-tenant bootstrap. Every copy is fill-only: a value already on the target wins, so
nothing an administrator set is ever overwritten.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from aitenant import contract, spec_rules
from aitenant.controllers import ownership

Obj = dict[str, Any]

# Fields of the legacy spec copied into MaasTenantConfig.spec, fill-only.
CONFIG_FIELDS = ("apiKeys", "telemetry")
# Fields of legacy spec.externalOIDC that the AITenant's spec.oidc knows.
OIDC_FIELDS = ("issuerUrl", "clientId", "ttl")
# Where each AITenant field filled by the migration comes from in the legacy spec.
LEGACY_FIELD = {"oidc": "externalOIDC", "gateway": "gatewayRef"}


class MigrationError(Exception):
    """The legacy object cannot be migrated as it is; the message: docs/contract.md §6.1."""


def _spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def legacy_oidc(legacy: Mapping[str, Any]) -> dict[str, Any] | None:
    """The legacy ``spec.externalOIDC`` in the AITenant's ``spec.oidc`` shape, or None."""
    oidc = _spec(legacy).get("externalOIDC")
    if not isinstance(oidc, Mapping) or not oidc:
        return None
    return {k: oidc[k] for k in OIDC_FIELDS if oidc.get(k) is not None}


def legacy_gateway(legacy: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of the legacy ``spec.gatewayRef``; empty strings when unset."""
    ref = _spec(legacy).get("gatewayRef")
    if not isinstance(ref, Mapping):
        return "", ""
    return str(ref.get("namespace") or ""), str(ref.get("name") or "")


def platform_context_patch(
    *,
    tenant: Mapping[str, Any],
    legacy: Mapping[str, Any],
    gateway_namespace: str,
    default_gateway_name: str,
) -> dict[str, Any] | None:
    """A merge patch filling the AITenant spec from the legacy object, or None.

    * ``spec.oidc`` ← ``externalOIDC`` when the AITenant has none;
    * ``spec.gateway.name`` ← ``gatewayRef.name`` when the AITenant has none, except that a
      non-default tenant never inherits the shared default Gateway (``--gateway-name``);
    * a legacy ``gatewayRef.namespace`` other than ``--gateway-namespace`` stops the migration
      (MigrationError) before anything is copied: the AITenant cannot choose its namespace;
    * so does a value the AITenant's own rules would refuse (e.g. an OIDC ``ttl`` under
      ``spec_rules.OIDC_TTL_MIN``, which a Tenant stored under an older, laxer schema can
      hold), whether or not the AITenant already has its own: nothing is copied, rather than a
      migration that stops halfway (the API server would refuse to mark such an object
      migrated anyway).
    """
    legacy_meta = _meta(legacy)
    legacy_ns, legacy_name = legacy_gateway(legacy)
    if legacy_ns and legacy_ns != gateway_namespace:
        raise MigrationError(
            f"legacy Tenant {legacy_meta.get('namespace', '')}/{legacy_meta.get('name', '')} "
            f'spec.gatewayRef.namespace="{legacy_ns}" does not match configured gateway '
            f'namespace "{gateway_namespace}"; AITenant supports gateway name migration only, '
            "so update --gateway-namespace or clear the legacy namespace before migration"
        )
    oidc = legacy_oidc(legacy)
    migrated: dict[str, Any] = {"oidc": oidc} if oidc is not None else {}
    if legacy_name:
        migrated["gateway"] = {"name": legacy_name}
    if problems := spec_rules.spec_problems({"spec": migrated}, gateway_namespace):
        path, message = problems[0]
        source = ".".join(("spec", LEGACY_FIELD.get(path[1], path[1]), *path[2:]))
        raise MigrationError(
            f"legacy Tenant {legacy_meta.get('namespace', '')}/{legacy_meta.get('name', '')} "
            f"{source} cannot be migrated to the AITenant: {message}. Correct {source} in the "
            "legacy Tenant, then change the AITenant's spec (or restart the controller) to resume"
        )
    spec = _spec(tenant)
    fill: dict[str, Any] = {}
    if spec.get("oidc") is None and oidc is not None:
        fill["oidc"] = oidc
    gateway = spec.get("gateway")
    current = gateway.get("name") if isinstance(gateway, Mapping) else None
    is_default = _meta(tenant).get("name") == contract.DEFAULT_TENANT_NAME
    shared_default = not is_default and legacy_name == default_gateway_name
    if legacy_name and not current and not shared_default:
        fill["gateway"] = {"name": legacy_name}
    return {"spec": fill} if fill else None


def migratable_oidc(legacy: Mapping[str, Any], gateway_namespace: str) -> dict[str, Any] | None:
    """The legacy OIDC settings when the AITenant's rules accept them as ``spec.oidc``."""
    oidc = legacy_oidc(legacy)
    if oidc is None or spec_rules.spec_problems({"spec": {"oidc": oidc}}, gateway_namespace):
        return None
    return oidc


def config_spec_fill(
    config_spec: Mapping[str, Any] | None, legacy: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The legacy ``apiKeys``/``telemetry`` the config spec lacks (empty when nothing to add)."""
    have = config_spec or {}
    source = _spec(legacy)
    return {
        key: copy.deepcopy(source[key])
        for key in CONFIG_FIELDS
        if have.get(key) is None and source.get(key) is not None
    }


def mark_patch(
    legacy: Mapping[str, Any], tenant_name: str, tenant_namespace: str
) -> dict[str, Any] | None:
    """Merge patch marking the legacy object migrated, or None when there is nothing to do.

    A legacy object that carries another AITenant's owner annotations is left alone. The patch
    carries the object's resourceVersion (optimistic lock).
    """
    meta = _meta(legacy)
    annotations = meta.get("annotations") or {}
    if ownership.managed_by_other(annotations, tenant_name, tenant_namespace):
        return None
    patch_meta: dict[str, Any] = {}
    wanted = {
        contract.ANNOTATION_DEPRECATED_BY: contract.DEPRECATED_BY_VALUE,
        contract.ANNOTATION_MIGRATED_TO: contract.MIGRATED_TO_VALUE,
    }
    if add := ownership.missing_metadata(annotations, wanted):
        patch_meta["annotations"] = add
    finalizers = list(meta.get("finalizers") or [])
    kept = [f for f in finalizers if f not in contract.LEGACY_TENANT_FINALIZERS]
    if kept != finalizers:
        patch_meta["finalizers"] = kept or None
    if not patch_meta:
        return None
    patch_meta["resourceVersion"] = meta.get("resourceVersion")
    return {"metadata": patch_meta}


def removal_verified(
    *,
    config: Mapping[str, Any] | None,
    legacy: Mapping[str, Any] | None,
    tenant_name: str,
    tenant_namespace: str,
    tenant_ns: str,
) -> bool:
    """True when the legacy object may be deleted: its settings provably live in the config.

    All must hold: the config ``default-tenant`` in the tenant namespace exists, is not being
    deleted, is owned by the AITenant and carries the AITenant's tracking labels; the legacy
    object is not another AITenant's and is marked migrated; its ``apiKeys`` and ``telemetry``
    are each unset or equal to the config's.
    """
    if config is None or legacy is None:
        return False
    config_meta = _meta(config)
    if (
        config_meta.get("name") != contract.TENANT_CONFIG_NAME
        or config_meta.get("namespace") != tenant_ns
        or config_meta.get("deletionTimestamp")
        or not ownership.owned_by(config_meta.get("annotations"), tenant_name, tenant_namespace)
    ):
        return False
    labels = config_meta.get("labels") or {}
    expected_labels = {
        contract.LABEL_MANAGED_BY: contract.MANAGED_BY_VALUE,
        contract.LABEL_MANAGED_BY_AITENANT: "true",
        contract.LABEL_TENANT_NAME: tenant_name,
        contract.LABEL_TENANT_NAMESPACE: tenant_ns,
    }
    if any(labels.get(k) != v for k, v in expected_labels.items()):
        return False
    legacy_annotations = _meta(legacy).get("annotations") or {}
    if ownership.managed_by_other(legacy_annotations, tenant_name, tenant_namespace):
        return False
    if (
        legacy_annotations.get(contract.ANNOTATION_DEPRECATED_BY) != contract.DEPRECATED_BY_VALUE
        or legacy_annotations.get(contract.ANNOTATION_MIGRATED_TO) != contract.MIGRATED_TO_VALUE
    ):
        return False
    legacy_spec, config_spec = _spec(legacy), _spec(config)
    return all(
        legacy_spec.get(key) is None or legacy_spec.get(key) == config_spec.get(key)
        for key in CONFIG_FIELDS
    )
