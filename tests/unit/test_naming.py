"""Naming rules of docs/contract.md §3.1, checked against upstream's examples."""

from __future__ import annotations

import hashlib

import pytest

from aitenant.naming import (
    bounded_name,
    claim_name,
    dns1123_label_errors,
    gateway_ref_for,
    object_admin_role_name,
    tenant_admin_role_name,
    tenant_namespace_for,
    tenant_suffix,
)

REGEX_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def h8(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def h16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --- tenant namespace ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "subscription_ns", "expected"),
    [
        ("models-as-a-service", "models-as-a-service", "models-as-a-service"),
        ("team-a", "models-as-a-service", "ai-tenant-team-a"),
        ("models-as-a-service", "custom-maas", "custom-maas"),
        ("custom-maas", "custom-maas", "custom-maas"),  # the documented collision edge
        ("team-a", "custom-maas", "ai-tenant-team-a"),
        ("models-as-a-service", "", "models-as-a-service"),
        ("team-a", "", "ai-tenant-team-a"),
    ],
)
def test_tenant_namespace_for(name: str, subscription_ns: str, expected: str) -> None:
    assert tenant_namespace_for(name, subscription_ns) == expected


# --- gateway reference --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected_name"),
    [
        (None, "team-a"),
        ({}, "team-a"),
        ({"gateway": None}, "team-a"),
        ({"gateway": {}}, "team-a"),
        ({"gateway": {"name": ""}}, "team-a"),
        ({"gateway": {"name": "shared-gw"}}, "shared-gw"),
        ({"gateway": "garbage"}, "team-a"),
        ("garbage", "team-a"),
    ],
)
def test_gateway_ref_for(spec: object, expected_name: str) -> None:
    obj: dict[str, object] = {"metadata": {"name": "team-a", "namespace": "ai-tenants"}}
    if spec is not None:
        obj["spec"] = spec
    assert gateway_ref_for(obj, "openshift-ingress") == ("openshift-ingress", expected_name)


def test_gateway_ref_for_without_a_name() -> None:
    assert gateway_ref_for({}, "gw-ns") == ("gw-ns", "")


# --- bounded names ------------------------------------------------------------------------


def test_bounded_name_fits() -> None:
    assert (
        bounded_name("aitenant-", "team-a", "-tenant-admin", 63) == "aitenant-team-a-tenant-admin"
    )


def test_41_char_names_give_exactly_63_char_roles() -> None:
    name = "a" * 41
    assert tenant_admin_role_name(name) == f"aitenant-{name}-tenant-admin"
    assert object_admin_role_name(name) == f"aitenant-{name}-object-admin"
    assert len(tenant_admin_role_name(name)) == 63
    assert len(object_admin_role_name(name)) == 63


def test_long_names_are_truncated_and_hashed() -> None:
    name = "b" * 42
    role = tenant_admin_role_name(name)
    # budget = 63 - 9 - 13 - 16 - 1 = 24
    assert role == f"aitenant-{'b' * 24}-tenant-admin-{h16(name)}"
    assert len(role) == 63


def test_truncation_strips_dashes_and_dots_at_both_ends() -> None:
    name = "-" + "x" * 22 + ".-" + "y" * 20
    result = bounded_name("aitenant-", name, "-tenant-admin", 63)
    # name[:24] == "-" + 22 x + "." -> stripped of "-" and "." on both ends
    assert result == f"aitenant-{'x' * 22}-tenant-admin-{h16(name)}"


def test_truncation_that_leaves_nothing_uses_the_hash() -> None:
    name = "-" * 50
    result = bounded_name("p-", name, "", 28)
    # budget = 28 - 2 - 0 - 16 - 1 = 9; "-" * 9 strips to "" -> 9 digits of the hash stand in
    assert result == f"p-{h16(name)[:9]}-{h16(name)}"
    assert len(result) == 28


def test_revocation_job_names() -> None:
    prefix, limit = "maas-api-revoke-keys-", 57
    short = "c" * 36
    assert bounded_name(prefix, short, "", limit) == prefix + short
    assert len(prefix + short) == 57
    longer = "c" * 37
    assert bounded_name(prefix, longer, "", limit) == f"{prefix}{'c' * 19}-{h16(longer)}"
    assert len(bounded_name(prefix, longer, "", limit)) == 57


def test_budget_below_one_falls_back_to_prefix_and_hash() -> None:
    name = "team-a-long-" + "x" * 20
    # budget = 63 - 33 - 13 - 16 - 1 = 0: prefix without its trailing dash, then the hash
    prefix = "p" * 32 + "-"
    assert bounded_name(prefix, name, "-tenant-admin", 63) == (
        f"{'p' * 32}-{h16(name)}-tenant-admin"
    )
    # When even that does not fit, the suffix is dropped.
    assert bounded_name("q" * 40 + "-", name, "-suffix", 63) == f"{'q' * 40}-{h16(name)}"
    # Only one trailing dash is removed from the prefix.
    assert bounded_name("r--", "x" * 30, "", 20) == f"r--{h16('x' * 30)}"
    # The legacy length, kept by the Gateway AuthPolicy.
    assert bounded_name("r--", "x" * 20, "", 12, hash_len=8) == f"r--{h8('x' * 20)}"


@pytest.mark.parametrize(
    ("prefix", "suffix", "limit"),
    [
        ("maas-api-key-cleanup-", "", 52),  # the platform's CronJob
        ("aitenant-", "-tenant-admin", 63),
        ("aitenant-", "-object-admin", 63),
        ("p" * 40 + "-", "-suffix", 63),  # no room left for the name
    ],
)
def test_cut_names_carry_64_bits_and_never_collide(prefix: str, suffix: str, limit: int) -> None:
    """Names sharing a prefix longer than the room left for them differ in 16 hex digits of
    their hash (docs/contract.md §3.1), and each is a valid DNS label within the limit."""
    shared = "team-" + "a" * 60
    names = [f"{shared}-{i}" for i in range(2000)] + [shared, shared + "b", shared[:-1]]
    results = {name: bounded_name(prefix, name, suffix, limit) for name in names}
    assert len(set(results.values())) == len(names)
    for name, result in results.items():
        assert len(result) <= limit
        assert dns1123_label_errors(result) == []
        assert h16(name) in result


# --- claim name, suffix -------------------------------------------------------------------


def test_claim_name() -> None:
    name = claim_name("openshift-ingress", "maas-default-gateway")
    digest = hashlib.sha256(b"openshift-ingress/maas-default-gateway").hexdigest()[:32]
    assert name == f"gateway-claim-{digest}"
    assert len(name) == 46
    assert claim_name("ns", "gw") != claim_name("ns", "gw2")


def test_tenant_suffix() -> None:
    assert tenant_suffix("models-as-a-service") == ""
    assert tenant_suffix("team-a") == "-team-a"


# --- DNS-1123 label -----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["a", "ai-tenant-team-a", "123-abc", "x" * 63])
def test_valid_labels(value: str) -> None:
    assert dns1123_label_errors(value) == []


@pytest.mark.parametrize("value", ["", "A", "-a", "a-", "a_b", "ai-tenant-Team", "é"])
def test_regex_message(value: str) -> None:
    assert dns1123_label_errors(value) == [REGEX_MSG]


def test_length_message() -> None:
    assert dns1123_label_errors("x" * 64) == ["must be no more than 63 characters"]


def test_length_and_regex_messages_together() -> None:
    assert dns1123_label_errors("X" * 64) == ["must be no more than 63 characters", REGEX_MSG]


def test_dots_message() -> None:
    assert dns1123_label_errors("ai-tenant-a.b") == ["must not contain dots"]


def test_derived_namespace_of_a_too_long_name() -> None:
    namespace = tenant_namespace_for("n" * 54, "models-as-a-service")
    assert "; ".join(dns1123_label_errors(namespace)) == "must be no more than 63 characters"
