"""Legacy Tenant migration rules (docs/contract.md §6): fill-only copies, marking, and the
verified-removal predicate."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aitenant import contract
from aitenant.controllers import ownership
from aitenant.controllers.legacy_tenant import (
    MigrationError,
    config_spec_fill,
    mark_patch,
    migratable_oidc,
    platform_context_patch,
    removal_verified,
)

GW_NS = "gateways"
DEFAULT_GW = "maas-default-gateway"
OIDC = {"issuerUrl": "https://idp.example/realms/a", "clientId": "maas", "ttl": 120}
DEPRECATED = {
    contract.ANNOTATION_DEPRECATED_BY: "MaasTenantConfig",
    contract.ANNOTATION_MIGRATED_TO: "default-tenant",
}


def aitenant(name: str = "team-a", spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ai-tenants"}, "spec": spec or {}}


def legacy(
    spec: dict[str, Any] | None = None,
    *,
    namespace: str = "ai-tenant-team-a",
    annotations: dict[str, str] | None = None,
    finalizers: list[str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "default-tenant",
        "namespace": namespace,
        "uid": "legacy-uid",
        "resourceVersion": "11",
    }
    if annotations is not None:
        meta["annotations"] = annotations
    if finalizers is not None:
        meta["finalizers"] = finalizers
    return {"metadata": meta, "spec": spec or {}}


def context(tenant: dict[str, Any], old: dict[str, Any]) -> dict[str, Any] | None:
    return platform_context_patch(
        tenant=tenant, legacy=old, gateway_namespace=GW_NS, default_gateway_name=DEFAULT_GW
    )


# -- docs/contract.md §6.1 platform context --------------------------------------------------------


def test_gateway_name_and_oidc_are_filled_into_an_empty_spec() -> None:
    old = legacy({"gatewayRef": {"namespace": GW_NS, "name": "team-gw"}, "externalOIDC": OIDC})
    assert context(aitenant(), old) == {"spec": {"gateway": {"name": "team-gw"}, "oidc": OIDC}}


def test_values_already_on_the_aitenant_win() -> None:
    spec = {"gateway": {"name": "mine"}, "oidc": {"issuerUrl": "https://x", "clientId": "c"}}
    old = legacy({"gatewayRef": {"namespace": GW_NS, "name": "team-gw"}, "externalOIDC": OIDC})
    assert context(aitenant(spec=spec), old) is None


def test_empty_gateway_name_on_the_aitenant_counts_as_unset() -> None:
    old = legacy({"gatewayRef": {"name": "team-gw"}})
    patch = context(aitenant(spec={"gateway": {"name": ""}}), old)
    assert patch == {"spec": {"gateway": {"name": "team-gw"}}}


def test_nothing_to_copy_gives_no_patch() -> None:
    assert context(aitenant(), legacy({"apiKeys": {"maxExpirationDays": 3}})) is None


def test_non_default_tenant_ignores_the_shared_default_gateway() -> None:
    old = legacy({"gatewayRef": {"namespace": GW_NS, "name": DEFAULT_GW}, "externalOIDC": OIDC})
    assert context(aitenant(), old) == {"spec": {"oidc": OIDC}}


def test_default_tenant_does_take_the_default_gateway_name() -> None:
    old = legacy({"gatewayRef": {"namespace": GW_NS, "name": DEFAULT_GW}})
    patch = context(aitenant("models-as-a-service"), old)
    assert patch == {"spec": {"gateway": {"name": DEFAULT_GW}}}


def test_oidc_copies_only_the_fields_the_aitenant_knows() -> None:
    old = legacy({"externalOIDC": {"issuerUrl": "https://i", "clientId": "c", "extra": "x"}})
    assert context(aitenant(), old) == {
        "spec": {"oidc": {"issuerUrl": "https://i", "clientId": "c"}}
    }


def test_gateway_namespace_mismatch_fails_with_upstreams_message_and_copies_nothing() -> None:
    old = legacy(
        {"gatewayRef": {"namespace": "openshift-ingress", "name": "gw"}, "externalOIDC": OIDC}
    )
    with pytest.raises(MigrationError) as info:
        context(aitenant(), old)
    assert str(info.value) == (
        "legacy Tenant ai-tenant-team-a/default-tenant "
        'spec.gatewayRef.namespace="openshift-ingress" does not match configured gateway '
        'namespace "gateways"; AITenant supports gateway name migration only, so update '
        "--gateway-namespace or clear the legacy namespace before migration"
    )


def test_mismatch_is_reported_even_when_the_aitenant_has_its_own_gateway() -> None:
    old = legacy({"gatewayRef": {"namespace": "elsewhere", "name": "gw"}})
    with pytest.raises(MigrationError):
        context(aitenant(spec={"gateway": {"name": "mine"}}), old)


@pytest.mark.parametrize(
    ("legacy_spec", "field", "problem"),
    [
        (
            {"externalOIDC": {**OIDC, "ttl": 10}},
            "spec.externalOIDC.ttl",
            "spec.oidc.ttl must be at least 30 seconds (got 10)",
        ),
        (
            {"externalOIDC": {"issuerUrl": "http://idp.example", "clientId": "maas"}},
            "spec.externalOIDC.issuerUrl",
            'spec.oidc.issuerUrl "http://idp.example" must start with https://',
        ),
        (
            {"externalOIDC": {"issuerUrl": "https://idp.example"}},
            "spec.externalOIDC.clientId",
            "spec.oidc.clientId is required when spec.oidc is set",
        ),
        (
            {"gatewayRef": {"namespace": GW_NS, "name": "Team_GW"}, "externalOIDC": OIDC},
            "spec.gatewayRef.name",
            'spec.gateway.name "Team_GW" must be a valid DNS-1123 label',
        ),
    ],
)
def test_values_the_aitenant_would_refuse_stop_the_migration_before_any_copy(
    legacy_spec: dict[str, Any], field: str, problem: str
) -> None:
    # A Tenant stored under an older, laxer schema: nothing of it is copied.
    with pytest.raises(MigrationError) as info:
        context(aitenant(), legacy(legacy_spec))
    message = str(info.value)
    assert message.startswith(
        f"legacy Tenant ai-tenant-team-a/default-tenant {field} cannot be migrated to the "
        f"AITenant: {problem}"
    )
    assert message.endswith(
        f"Correct {field} in the legacy Tenant, then change the AITenant's spec (or restart "
        "the controller) to resume"
    )


def test_a_refused_legacy_value_stops_the_migration_even_when_the_aitenant_has_its_own() -> None:
    # Nothing would be copied, but such a Tenant cannot even be marked migrated.
    old = legacy({"externalOIDC": {**OIDC, "ttl": 10}})
    with pytest.raises(MigrationError, match=r"spec\.externalOIDC\.ttl cannot be migrated"):
        context(aitenant(spec={"oidc": OIDC}), old)


def test_migratable_oidc_leaves_out_what_the_aitenant_would_refuse() -> None:
    assert migratable_oidc(legacy({"externalOIDC": OIDC}), GW_NS) == OIDC
    assert migratable_oidc(legacy({"externalOIDC": {**OIDC, "ttl": 10}}), GW_NS) is None
    assert migratable_oidc(legacy({}), GW_NS) is None


# -- docs/contract.md §6.2 config fill -------------------------------------------------------------


def test_config_fill_copies_api_keys_and_telemetry_only() -> None:
    old = legacy(
        {
            "apiKeys": {"maxExpirationDays": 30},
            "telemetry": {"enabled": True, "metrics": {"captureUser": True}},
            "payloadProcessing": {"replicas": 2},
            "gatewayRef": {"name": "gw"},
            "externalOIDC": OIDC,
        }
    )
    fill = config_spec_fill({}, old)
    assert fill == {
        "apiKeys": {"maxExpirationDays": 30},
        "telemetry": {"enabled": True, "metrics": {"captureUser": True}},
    }
    fill["telemetry"]["enabled"] = False  # a copy, not the legacy object's own dict
    assert old["spec"]["telemetry"]["enabled"] is True


def test_config_fill_never_overwrites() -> None:
    old = legacy({"apiKeys": {"maxExpirationDays": 30}, "telemetry": {"enabled": True}})
    assert config_spec_fill({"apiKeys": {"maxExpirationDays": 7}}, old) == {
        "telemetry": {"enabled": True}
    }
    assert config_spec_fill({"apiKeys": {}, "telemetry": {}}, old) == {}


def test_config_fill_without_legacy_object() -> None:
    assert config_spec_fill({}, None) == {}
    assert config_spec_fill(None, legacy({})) == {}


# -- docs/contract.md §6.3 marking -----------------------------------------------------------------


def test_mark_adds_annotations_drops_stale_finalizers_and_locks() -> None:
    old = legacy(
        finalizers=[
            "maas.opendatahub.io/tenant-cleanup",
            "example.com/keep-me",
            "maas.opendatahub.io/tenant-finalizer",
        ]
    )
    assert mark_patch(old, "team-a", "ai-tenants") == {
        "metadata": {
            "annotations": DEPRECATED,
            "finalizers": ["example.com/keep-me"],
            "resourceVersion": "11",
        }
    }


def test_mark_removes_the_finalizer_list_when_only_stale_ones_remain() -> None:
    old = legacy(annotations=dict(DEPRECATED), finalizers=["maas.opendatahub.io/tenant-cleanup"])
    assert mark_patch(old, "team-a", "ai-tenants") == {
        "metadata": {"finalizers": None, "resourceVersion": "11"}
    }


def test_mark_is_a_no_op_once_marked() -> None:
    assert mark_patch(legacy(annotations=dict(DEPRECATED)), "team-a", "ai-tenants") is None


def test_mark_leaves_another_aitenants_object_alone() -> None:
    theirs = ownership.tenant_annotations("team-b", "ai-tenants")
    assert mark_patch(legacy(annotations=theirs), "team-a", "ai-tenants") is None
    ours = ownership.tenant_annotations("team-a", "ai-tenants")
    assert mark_patch(legacy(annotations=ours), "team-a", "ai-tenants") is not None


# -- docs/contract.md §6.4 verified removal --------------------------------------------------------

TNS = "ai-tenant-team-a"


def managed_config(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "default-tenant",
            "namespace": TNS,
            "labels": ownership.tenant_labels("team-a", TNS),
            "annotations": ownership.tenant_annotations("team-a", "ai-tenants"),
        },
        "spec": spec if spec is not None else {"apiKeys": {"maxExpirationDays": 30}},
    }


def marked_legacy(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return legacy(
        spec if spec is not None else {"apiKeys": {"maxExpirationDays": 30}},
        namespace=TNS,
        annotations=dict(DEPRECATED),
    )


def verified(config: dict[str, Any] | None, old: dict[str, Any] | None) -> bool:
    return removal_verified(
        config=config,
        legacy=old,
        tenant_name="team-a",
        tenant_namespace="ai-tenants",
        tenant_ns=TNS,
    )


def edit(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy with the key at ``path`` set to ``value``, or removed when value is None."""
    out = copy.deepcopy(obj)
    *parents, last = path
    target = out
    for key in parents:
        target = target.setdefault(key, {})
    if value is None:
        target.pop(last, None)
    else:
        target[last] = value
    return out


def test_verified_when_everything_matches() -> None:
    assert verified(managed_config(), marked_legacy())


def test_verified_when_the_legacy_object_had_nothing_to_migrate() -> None:
    assert verified(managed_config({}), marked_legacy({"gatewayRef": {"name": "gw"}}))


def test_payload_processing_takes_no_part() -> None:
    old = marked_legacy({"apiKeys": {"maxExpirationDays": 30}, "payloadProcessing": {"x": 1}})
    assert verified(managed_config(), old)


def config_with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    return edit(managed_config(), path, value)


def legacy_with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    return edit(marked_legacy(), path, value)


LABELS = ("metadata", "labels")
ANNOTATIONS = ("metadata", "annotations")
THEIRS = ownership.tenant_annotations("team-b", "ai-tenants")


@pytest.mark.parametrize(
    ("why", "config", "old"),
    [
        ("no config", None, marked_legacy()),
        ("no legacy object", managed_config(), None),
        (
            "config being deleted",
            config_with(("metadata", "deletionTimestamp"), "t"),
            marked_legacy(),
        ),
        ("config of another name", config_with(("metadata", "name"), "other"), marked_legacy()),
        ("config elsewhere", config_with(("metadata", "namespace"), "x"), marked_legacy()),
        ("config not ours", config_with(("metadata", "annotations"), {}), marked_legacy()),
        (
            "config of another AITenant",
            config_with(("metadata", "annotations"), THEIRS),
            marked_legacy(),
        ),
        ("no managed-by", config_with((*LABELS, contract.LABEL_MANAGED_BY), None), marked_legacy()),
        (
            "managed-by-aitenant not true",
            config_with((*LABELS, contract.LABEL_MANAGED_BY_AITENANT), "false"),
            marked_legacy(),
        ),
        (
            "tenant-name label differs",
            config_with((*LABELS, contract.LABEL_TENANT_NAME), "team-b"),
            marked_legacy(),
        ),
        (
            "tenant-namespace label differs",
            config_with((*LABELS, contract.LABEL_TENANT_NAMESPACE), "x"),
            marked_legacy(),
        ),
        (
            "legacy object of another AITenant",
            managed_config(),
            legacy_with((*ANNOTATIONS, contract.ANNOTATION_AITENANT_NAME), "team-b"),
        ),
        (
            "legacy object not marked",
            managed_config(),
            legacy_with(("metadata", "annotations"), {}),
        ),
        (
            "deprecated-by differs",
            managed_config(),
            legacy_with((*ANNOTATIONS, contract.ANNOTATION_DEPRECATED_BY), "Tenant"),
        ),
        (
            "migrated-to missing",
            managed_config(),
            legacy_with((*ANNOTATIONS, contract.ANNOTATION_MIGRATED_TO), None),
        ),
        (
            "apiKeys edited in the config",
            managed_config({"apiKeys": {"maxExpirationDays": 7}}),
            marked_legacy(),
        ),
        ("apiKeys missing from the config", managed_config({}), marked_legacy()),
        (
            "telemetry differs",
            managed_config({"apiKeys": {"maxExpirationDays": 30}, "telemetry": {"enabled": False}}),
            marked_legacy({"apiKeys": {"maxExpirationDays": 30}, "telemetry": {"enabled": True}}),
        ),
    ],
)
def test_not_verified(why: str, config: dict[str, Any] | None, old: dict[str, Any] | None) -> None:
    assert not verified(config, old), why
