"""No two tenants' platforms share an object or a pod selector, whatever their names
(docs/platform.md §13). A property over valid tenant and Gateway names, with the names that
once collided (one tenant's name a prefix plus another's) drawn on purpose."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from aitenant import contract, naming
from aitenant.platform.render import PlatformContext, names_for, render

from .conftest import MakeContext

TENANT_NAME_MAX = 41  # the AITenant CRD's limit (docs/contract.md §3.1)
LABEL_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-"


def dns_label(max_size: int) -> st.SearchStrategy[str]:
    return (
        st.text(LABEL_CHARS, min_size=1, max_size=max_size)
        .filter(lambda s: not s.startswith("-") and not s.endswith("-"))
        .filter(lambda s: not naming.dns1123_label_errors(s))
    )


# Words our derived names are built of: a tenant named with them is the likeliest to collide.
WORDS = ("key-cleanup", "maas-api", "route", "serving-cert", "backend-ca", "default-deny", "auth")


@st.composite
def tenant_pair(draw: st.DrawFn) -> tuple[str, str]:
    first = draw(st.one_of(dns_label(TENANT_NAME_MAX), st.just(contract.DEFAULT_TENANT_NAME)))
    word = draw(st.sampled_from(WORDS))
    base = "" if first == contract.DEFAULT_TENANT_NAME else first
    second = draw(
        st.one_of(
            dns_label(TENANT_NAME_MAX),
            st.sampled_from(
                [
                    f"{word}-{base}".strip("-"),
                    f"{base}-{word}".strip("-"),
                    word,
                    f"key-cleanup-{base}".strip("-"),
                ]
            ),
        )
    )
    assume(len(second) <= TENANT_NAME_MAX and not naming.dns1123_label_errors(second))
    assume(first != second)
    return first, second


def context(make: MakeContext, tenant: str, gateway: str) -> PlatformContext:
    return make(
        tenant=tenant,
        tenant_namespace=naming.tenant_namespace_for(
            tenant, contract.DEFAULT_SUBSCRIPTION_NAMESPACE
        ),
        gateway_name=gateway,
    )


def pod_labels(obj: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The labels of the pods an object makes."""
    spec = obj.get("spec") or {}
    if obj["kind"] == "Deployment":
        yield spec["template"]["metadata"]["labels"]
    if obj["kind"] == "CronJob":
        yield spec["jobTemplate"]["spec"]["template"]["metadata"]["labels"]


def pod_selectors(node: Any) -> Iterator[dict[str, str]]:
    """Every label selector (``matchLabels``, a Service's ``selector``) anywhere in an object."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("matchLabels", "selector") and isinstance(value, dict):
                labels = value.get("matchLabels", value)
                if all(isinstance(v, str) for v in labels.values()):
                    yield labels
            yield from pod_selectors(value)
    elif isinstance(node, list):
        for item in node:
            yield from pod_selectors(item)


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pair=tenant_pair(), gateways=st.tuples(dns_label(63), dns_label(63)))
def test_two_tenants_never_share_an_object_or_a_pod(
    make_ctx: MakeContext, pair: tuple[str, str], gateways: tuple[str, str]
) -> None:
    # Two tenants never hold one Gateway (the claim); each may have any valid Gateway name.
    assume(gateways[0] != gateways[1])
    one = render(context(make_ctx, pair[0], gateways[0]))
    other = render(context(make_ctx, pair[1], gateways[1]))
    shared = {m.ref for m in one} & {m.ref for m in other}
    assert not shared, f"{pair}: both render {sorted(shared)}"
    for mine, theirs in ((one, other), (other, one)):
        their_pods = [labels for m in theirs for labels in pod_labels(m.obj)]
        for manifest in mine:
            for selector in pod_selectors(manifest.obj.get("spec")):
                hit = [labels for labels in their_pods if selects(selector, labels)]
                assert not hit, f"{pair}: {manifest} selects the other tenant's pods {hit}"


def test_the_names_that_once_collided(make_ctx: MakeContext) -> None:
    """``t`` and ``key-cleanup-t`` (and ``key-cleanup`` beside the default tenant) rendered one
    NetworkPolicy and one tenant-instance value."""
    for first, second in (("t", "key-cleanup-t"), (contract.DEFAULT_TENANT_NAME, "key-cleanup")):
        a, b = names_for(first, "gw-a", "gw"), names_for(second, "gw-b", "gw")
        assert {a.api, a.cleanup_instance}.isdisjoint({b.api, b.cleanup_instance})
        one = {m.ref for m in render(context(make_ctx, first, "gw-a"))}
        other = {m.ref for m in render(context(make_ctx, second, "gw-b"))}
        assert one.isdisjoint(other)


def test_a_63_character_gateway_name_gives_names_within_63() -> None:
    gateway = "g" * 63
    name = naming.gateway_auth_policy_name("red", gateway)
    assert len(name) <= 63
    assert name.startswith("g" * 44 + "-maas-auth-")
    assert naming.gateway_auth_policy_name("red", "gw") == "gw-maas-auth"
