"""Admission rules for AITenant: every rule, its exact message, and the order they run in."""

from __future__ import annotations

from typing import Any

import pytest
from webhook_fakes import AIT_NS, GW_NS, POLICY, FakeIndex, tenant

from aitenant.webhook.validators import (
    MSG_NAME_NOT_DNS1123,
    MSG_NAME_TOO_LONG,
    MSG_NOT_SYNCED,
    Verdict,
    WebhookPolicy,
    allow,
    deny,
    validate_create,
    validate_update,
)

IN_USE = (
    "gateway openshift-ingress/{gw} is already in use by AITenant ai-tenants/{holder}; "
    "each AITenant requires a dedicated Gateway for isolation; please create a new Gateway "
    "for this tenant or specify a different gateway name in spec.gateway.name"
)
OIDC = {"issuerUrl": "https://issuer.example.com", "clientId": "maas", "ttl": 300}


def create(obj: Any, index: FakeIndex | None = None, policy: WebhookPolicy = POLICY) -> Verdict:
    return validate_create(obj, policy=policy, index=index or FakeIndex())


def update(
    old: Any, new: Any, index: FakeIndex | None = None, policy: WebhookPolicy = POLICY
) -> Verdict:
    return validate_update(old, new, policy=policy, index=index or FakeIndex())


# --- verdict helpers ----------------------------------------------------------------------


def test_allow_and_deny_helpers() -> None:
    assert allow() == Verdict(allowed=True, message="", code=200)
    assert deny("no") == Verdict(allowed=False, message="no", code=403)
    assert deny("later", code=503).code == 503


def test_valid_tenant_is_allowed() -> None:
    verdict = create(tenant("team-a", spec={"oidc": OIDC}))
    assert verdict == allow()


# --- 1. type checks -----------------------------------------------------------------------


def test_create_rejects_other_kinds() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": AIT_NS}}
    assert create(pod) == deny("expected AITenant object, got v1, Kind=Pod")


def test_create_rejects_aitenant_of_another_group() -> None:
    other = {**tenant(), "apiVersion": "example.com/v1"}
    assert create(other).message == "expected AITenant object, got example.com/v1, Kind=AITenant"


@pytest.mark.parametrize(
    ("obj", "got"),
    [
        (None, "null"),
        ([], "array"),
        ("AITenant", "string"),
        ({}, "an object without apiVersion and kind"),
    ],
)
def test_create_rejects_non_objects(obj: Any, got: str) -> None:
    assert create(obj).message == f"expected AITenant object, got {got}"


def test_update_type_checks_name_old_then_new() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod"}
    assert update(pod, pod).message == "expected AITenant object for old, got v1, Kind=Pod"
    assert update(tenant(), pod).message == "expected AITenant object for new, got v1, Kind=Pod"


# --- 2. configuration guards --------------------------------------------------------------


def test_guard_aitenant_namespace_not_configured() -> None:
    policy = WebhookPolicy(aitenant_namespace="", gateway_namespace=GW_NS)
    expected = deny("AITenant infrastructure namespace is not configured")
    assert create(tenant(), policy=policy) == expected
    assert update(tenant(), tenant(), policy=policy) == expected


def test_guard_gateway_namespace_not_configured() -> None:
    policy = WebhookPolicy(aitenant_namespace=AIT_NS, gateway_namespace="")
    expected = deny("gateway namespace is not configured")
    assert create(tenant(), policy=policy) == expected
    assert update(tenant(), tenant(), policy=policy) == expected


def test_guards_run_after_type_check_and_before_name() -> None:
    policy = WebhookPolicy(aitenant_namespace="", gateway_namespace="")
    assert create({"kind": "Pod"}, policy=policy).message.startswith("expected AITenant")
    bad_name = tenant("Bad_Name")
    assert create(bad_name, policy=policy).message.startswith("AITenant infrastructure")


# --- 3. name (docs/differences.md D4, CREATE only) ------------------------------------------------


def test_name_messages_are_the_crd_cel_messages() -> None:
    assert MSG_NAME_TOO_LONG == (
        "AITenant name must be at most 41 characters (required for per-tenant resource "
        "naming with 63-character Kubernetes limit)"
    )
    assert MSG_NAME_NOT_DNS1123 == (
        "AITenant name must be a valid DNS-1123 label (lowercase alphanumeric and hyphens, "
        "starting and ending with alphanumeric)"
    )


def test_name_of_41_characters_is_allowed_42_is_not() -> None:
    assert create(tenant("a" * 41)).allowed
    assert create(tenant("a" * 42)) == deny(MSG_NAME_TOO_LONG)


@pytest.mark.parametrize("name", ["Team-A", "team_a", "-team", "team-", "team.a", "", "tëam"])
def test_name_must_be_dns1123_label(name: str) -> None:
    assert create(tenant(name)) == deny(MSG_NAME_NOT_DNS1123)


def test_name_length_is_checked_before_the_label_rule() -> None:
    assert create(tenant("A" * 42)).message == MSG_NAME_TOO_LONG


def test_name_rules_come_before_spec_and_placement() -> None:
    obj = tenant("Bad", namespace="elsewhere", spec={"oidc": {"issuerUrl": "http://x"}})
    assert create(obj).message == MSG_NAME_NOT_DNS1123


def test_name_rules_are_not_applied_on_update() -> None:
    legacy = tenant("a" * 42)
    assert update(legacy, legacy).allowed


# --- 4. spec rules ------------------------------------------------------------------------

GW_HINT = (
    'set it to the name of a Gateway in namespace "openshift-ingress", '
    "or remove it to use the AITenant name"
)
ISSUER_HINT = "set it to the https:// URL of your OIDC issuer, or remove spec.oidc"
CLIENT_HINT = "set it to the client ID registered with your OIDC issuer, or remove spec.oidc"
TTL_HINT = "use 30 or more, or remove it to get the default of 300"

SPEC_DENIALS: list[tuple[str, dict[str, Any], str]] = [
    ("spec-not-object", {"__spec__": "x"}, "spec must be an object, got string"),
    (
        "gateway-not-object",
        {"gateway": "gw"},
        "spec.gateway must be an object with an optional name, got string",
    ),
    (
        "gateway-name-not-string",
        {"gateway": {"name": 7}},
        f"spec.gateway.name must be a string, got number; {GW_HINT}",
    ),
    (
        "gateway-name-too-long",
        {"gateway": {"name": "g" * 64}},
        f"spec.gateway.name must be at most 63 characters (got 64); {GW_HINT}",
    ),
    (
        "gateway-name-pattern",
        {"gateway": {"name": "My_Gateway"}},
        'spec.gateway.name "My_Gateway" must be a valid DNS-1123 label (lowercase alphanumeric '
        f"and hyphens, starting and ending with alphanumeric); {GW_HINT}",
    ),
    (
        "gateway-name-trailing-dash",
        {"gateway": {"name": "gw-"}},
        'spec.gateway.name "gw-" must be a valid DNS-1123 label (lowercase alphanumeric '
        f"and hyphens, starting and ending with alphanumeric); {GW_HINT}",
    ),
    (
        "oidc-not-object",
        {"oidc": ["x"]},
        "spec.oidc must be an object with issuerUrl and clientId, got array; "
        "set both fields, or remove spec.oidc",
    ),
    (
        "issuer-missing",
        {"oidc": {"clientId": "maas"}},
        f"spec.oidc.issuerUrl is required when spec.oidc is set; {ISSUER_HINT}",
    ),
    (
        "issuer-not-string",
        {"oidc": {"issuerUrl": 1, "clientId": "maas"}},
        f"spec.oidc.issuerUrl must be a string, got number; {ISSUER_HINT}",
    ),
    (
        "issuer-empty",
        {"oidc": {"issuerUrl": "", "clientId": "maas"}},
        f"spec.oidc.issuerUrl must not be empty; {ISSUER_HINT}",
    ),
    (
        "issuer-http",
        {"oidc": {"issuerUrl": "http://issuer.example.com", "clientId": "maas"}},
        'spec.oidc.issuerUrl "http://issuer.example.com" must start with https:// and contain '
        f"no whitespace; {ISSUER_HINT}",
    ),
    (
        "issuer-whitespace",
        {"oidc": {"issuerUrl": "https://issuer .example.com", "clientId": "maas"}},
        'spec.oidc.issuerUrl "https://issuer .example.com" must start with https:// and '
        f"contain no whitespace; {ISSUER_HINT}",
    ),
    (
        "issuer-scheme-only",
        {"oidc": {"issuerUrl": "https://", "clientId": "maas"}},
        'spec.oidc.issuerUrl "https://" must start with https:// and contain no whitespace; '
        f"{ISSUER_HINT}",
    ),
    (
        "issuer-too-long",
        {"oidc": {"issuerUrl": "https://" + "a" * 2041, "clientId": "maas"}},
        f"spec.oidc.issuerUrl must be between 9 and 2048 characters (got 2049); {ISSUER_HINT}",
    ),
    (
        "client-missing",
        {"oidc": {"issuerUrl": "https://issuer"}},
        f"spec.oidc.clientId is required when spec.oidc is set; {CLIENT_HINT}",
    ),
    (
        "client-not-string",
        {"oidc": {"issuerUrl": "https://issuer", "clientId": ["a"]}},
        f"spec.oidc.clientId must be a string, got array; {CLIENT_HINT}",
    ),
    (
        "client-empty",
        {"oidc": {"issuerUrl": "https://issuer", "clientId": ""}},
        f"spec.oidc.clientId must not be empty; {CLIENT_HINT}",
    ),
    (
        "client-whitespace",
        {"oidc": {"issuerUrl": "https://issuer", "clientId": "my client"}},
        f'spec.oidc.clientId "my client" must not contain whitespace; {CLIENT_HINT}',
    ),
    (
        "client-too-long",
        {"oidc": {"issuerUrl": "https://issuer", "clientId": "c" * 257}},
        f"spec.oidc.clientId must be at most 256 characters (got 257); {CLIENT_HINT}",
    ),
    (
        "ttl-too-small",
        {"oidc": {"issuerUrl": "https://issuer", "clientId": "maas", "ttl": 29}},
        f"spec.oidc.ttl must be at least 30 seconds (got 29); {TTL_HINT}",
    ),
    (
        "ttl-negative",
        {"oidc": {"issuerUrl": "https://issuer", "clientId": "maas", "ttl": -1}},
        f"spec.oidc.ttl must be at least 30 seconds (got -1); {TTL_HINT}",
    ),
    (
        "ttl-string",
        {"oidc": {"issuerUrl": "https://issuer", "clientId": "maas", "ttl": "300"}},
        f'spec.oidc.ttl must be an integer number of seconds, got string "300"; {TTL_HINT}',
    ),
    (
        "ttl-bool",
        {"oidc": {"issuerUrl": "https://issuer", "clientId": "maas", "ttl": True}},
        f"spec.oidc.ttl must be an integer number of seconds, got boolean true; {TTL_HINT}",
    ),
    (
        "ttl-fraction",
        {"oidc": {"issuerUrl": "https://issuer", "clientId": "maas", "ttl": 30.5}},
        f"spec.oidc.ttl must be an integer number of seconds, got number 30.5; {TTL_HINT}",
    ),
]


def _with_spec(spec: dict[str, Any], name: str = "team-a") -> dict[str, Any]:
    obj = tenant(name)
    obj["spec"] = spec.get("__spec__", spec)
    return obj


@pytest.mark.parametrize(
    ("spec", "message"), [(s, m) for _, s, m in SPEC_DENIALS], ids=[i for i, _, _ in SPEC_DENIALS]
)
def test_spec_rule_denies_create_with_field_path(spec: dict[str, Any], message: str) -> None:
    assert create(_with_spec(spec)) == deny(message)


@pytest.mark.parametrize(
    ("spec", "message"), [(s, m) for _, s, m in SPEC_DENIALS], ids=[i for i, _, _ in SPEC_DENIALS]
)
def test_spec_rule_denies_update_that_introduces_it(spec: dict[str, Any], message: str) -> None:
    assert update(tenant("team-a"), _with_spec(spec)) == deny(message)


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"gateway": None},
        {"gateway": {}},
        {"gateway": {"name": ""}},
        {"gateway": {"name": "g" * 63}},
        {"gateway": {"name": "gw-1"}},
        {"oidc": None},
        {"oidc": {"issuerUrl": "https://a", "clientId": "c"}},
        {"oidc": {"issuerUrl": "https://" + "a" * 2040, "clientId": "c" * 256}},
        {"oidc": {"issuerUrl": "https://issuer/é", "clientId": "c", "ttl": 30}},
        {"oidc": {"issuerUrl": "https://issuer", "clientId": "c", "ttl": None}},
        {"oidc": {"issuerUrl": "https://issuer", "clientId": "c", "ttl": 300.0}},
        {"rbac": {"admins": [{"kind": "Nobody", "name": ""}]}},  # deprecated, ignored
    ],
)
def test_spec_values_the_crd_accepts_are_allowed(spec: dict[str, Any]) -> None:
    assert create(_with_spec(spec)) == allow()


def test_gateway_rule_comes_before_oidc_rules() -> None:
    spec = {"gateway": {"name": "BAD"}, "oidc": {"issuerUrl": "http://x"}}
    assert create(_with_spec(spec)).message.startswith('spec.gateway.name "BAD"')


def test_oidc_rules_run_issuer_client_ttl() -> None:
    spec = {"oidc": {"issuerUrl": "http://x", "clientId": "", "ttl": 1}}
    assert create(_with_spec(spec)).message.startswith("spec.oidc.issuerUrl")
    spec = {"oidc": {"issuerUrl": "https://x.example", "clientId": "", "ttl": 1}}
    assert create(_with_spec(spec)).message.startswith("spec.oidc.clientId")


def test_spec_rules_come_before_namespace_placement() -> None:
    obj = tenant("team-a", namespace="elsewhere", spec={"oidc": {"issuerUrl": "https://x.y"}})
    assert create(obj).message.startswith("spec.oidc.clientId is required")


def test_update_ratchets_unchanged_invalid_values() -> None:
    legacy = tenant("team-a", spec={"oidc": {**OIDC, "ttl": 10}})
    relabelled = tenant("team-a", spec={"oidc": {**OIDC, "ttl": 10}})
    relabelled["metadata"]["labels"] = {"x": "y"}
    assert update(legacy, relabelled) == allow()
    worse = tenant("team-a", spec={"oidc": {**OIDC, "ttl": 5}})
    assert update(legacy, worse).message.startswith("spec.oidc.ttl must be at least 30")


def test_update_ratchet_is_per_field() -> None:
    legacy = tenant("team-a", spec={"oidc": {**OIDC, "ttl": 10}})
    new = tenant("team-a", spec={"oidc": {**OIDC, "ttl": 10, "clientId": "a b"}})
    assert update(legacy, new).message.startswith('spec.oidc.clientId "a b"')


# --- 5. namespace placement (CREATE only) -------------------------------------------------


def test_create_outside_the_aitenant_namespace_is_denied() -> None:
    verdict = create(tenant("team-a", namespace="default"))
    assert verdict == deny(
        "AITenant default/team-a must be created in the configured AITenant infrastructure "
        'namespace "ai-tenants"'
    )


def test_create_in_the_subscription_namespace_is_denied_by_the_same_rule() -> None:
    verdict = create(tenant("models-as-a-service", namespace="models-as-a-service"))
    assert "configured AITenant infrastructure namespace" in verdict.message
    assert "ai-tenants" in verdict.message


def test_placement_comes_before_uniqueness_and_sync() -> None:
    index = FakeIndex([tenant("other", gateway="team-a")], synced=False)
    verdict = create(tenant("team-a", namespace="default"), index)
    assert verdict.message.startswith("AITenant default/team-a must be created")
    assert index.calls == []


def test_no_namespace_check_on_update() -> None:
    misplaced = tenant("team-a", namespace="default")
    assert update(misplaced, misplaced) == allow()


# --- 6. gateway uniqueness ----------------------------------------------------------------


def test_create_denied_when_gateway_used_by_another_tenant() -> None:
    index = FakeIndex([tenant("team-b", gateway="shared")])
    verdict = create(tenant("team-a", gateway="shared"), index)
    assert verdict == deny(IN_USE.format(gw="shared", holder="team-b"))
    assert index.calls == [(GW_NS, "shared")]


def test_default_gateway_name_is_the_tenant_name() -> None:
    # team-b explicitly uses a Gateway called team-a; team-a without spec.gateway wants it too.
    index = FakeIndex([tenant("team-b", gateway="team-a")])
    assert create(tenant("team-a"), index).message == IN_USE.format(gw="team-a", holder="team-b")


def test_empty_gateway_name_falls_back_to_the_tenant_name() -> None:
    index = FakeIndex([tenant("team-b", gateway="team-a")])
    obj = tenant("team-a", gateway="")
    assert create(obj, index).message == IN_USE.format(gw="team-a", holder="team-b")


def test_deleting_tenants_still_hold_their_gateway() -> None:
    index = FakeIndex([tenant("team-b", gateway="shared", deleting=True)])
    verdict = create(tenant("team-a", gateway="shared"), index)
    assert verdict.message == IN_USE.format(gw="shared", holder="team-b")


def test_distinct_gateways_are_allowed() -> None:
    index = FakeIndex([tenant("team-b", gateway="gw-b")])
    assert create(tenant("team-a", gateway="gw-a"), index) == allow()


def test_first_holder_in_sorted_order_is_named() -> None:
    index = FakeIndex([tenant("zeta", gateway="shared"), tenant("alpha", gateway="shared")])
    verdict = create(tenant("team-a", gateway="shared"), index)
    assert verdict.message == IN_USE.format(gw="shared", holder="alpha")


def test_tenants_outside_the_aitenant_namespace_do_not_hold_gateways() -> None:
    index = FakeIndex([tenant("team-b", namespace="default", gateway="shared")])
    assert create(tenant("team-a", gateway="shared"), index) == allow()


def test_update_skips_the_object_itself() -> None:
    me = tenant("team-a", gateway="gw-a")
    index = FakeIndex([me])
    assert update(me, me, index) == allow()


def test_update_that_keeps_the_gateway_is_admitted_beside_a_sharer() -> None:
    # Two tenants made before the webhook share a Gateway; an update that keeps the Gateway
    # cannot create sharing, so relabelling either is admitted (docs/differences.md D29).
    me = tenant("team-a", gateway="shared")
    index = FakeIndex([me, tenant("team-b", gateway="shared")])
    relabelled = tenant("team-a", gateway="shared")
    relabelled["metadata"]["labels"] = {"example.com/x": "y"}
    assert update(me, relabelled, index) == allow()


def test_finalizer_removal_of_a_deleting_tenant_is_admitted_beside_a_sharer() -> None:
    me = tenant("team-a", gateway="shared", deleting=True)
    index = FakeIndex([me, tenant("team-b", gateway="shared")])
    removing_finalizer = tenant("team-a", gateway="shared", deleting=True)
    removing_finalizer["metadata"]["finalizers"] = []
    assert update(me, removing_finalizer, index) == allow()


def test_a_deleting_tenant_may_name_a_taken_gateway() -> None:
    # It is on its way out of every Gateway: nothing it names can become shared.
    index = FakeIndex([tenant("team-b", gateway="gw-b")])
    old = tenant("team-a", gateway="gw-a", deleting=True)
    new = tenant("team-a", gateway="gw-b", deleting=True)
    assert update(old, new, index) == allow()


def test_an_implicit_gateway_made_explicit_is_not_a_move() -> None:
    index = FakeIndex([tenant("team-a"), tenant("team-b", gateway="team-a")])
    assert update(tenant("team-a"), tenant("team-a", gateway="team-a"), index) == allow()


def test_update_to_a_taken_gateway_is_denied() -> None:
    index = FakeIndex([tenant("team-a", gateway="gw-a"), tenant("team-b", gateway="gw-b")])
    old, new = tenant("team-a", gateway="gw-a"), tenant("team-a", gateway="gw-b")
    assert update(old, new, index).message == IN_USE.format(gw="gw-b", holder="team-b")


def test_not_synced_cache_denies_instead_of_guessing() -> None:
    index = FakeIndex(synced=False)
    expected = Verdict(allowed=False, message=MSG_NOT_SYNCED, code=503)
    assert create(tenant(), index) == expected
    moved = tenant(gateway="elsewhere")
    assert update(tenant(), moved, index) == expected
    assert index.calls == []
    assert MSG_NOT_SYNCED == (
        "AITenant webhook is not ready: the AITenant cache has not synced yet; retry shortly"
    )


def test_index_failure_denies() -> None:
    index = FakeIndex(error=RuntimeError("boom"))
    assert create(tenant(), index) == deny("failed to list AITenants: boom")
