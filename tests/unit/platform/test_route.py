"""The tenant's HTTPRoute sends maas-api's public API and nothing else (docs/differences.md
D33, docs/platform.md §5). The route is read the way the Gateway API says a Gateway reads it
(an Exact match beats a prefix, the longest prefix wins, a prefix compares whole segments, a
rewrite replaces what matched), after and without the normalisation a Gateway does first."""

from __future__ import annotations

from typing import Any

import pytest

from aitenant.platform.render import API_PREFIX, ROUTE_PREFIXES, PlatformContext, render

from .conftest import MakeContext

# Requests maas-api's router serves at the reference commit, with a sample for each parameter.
PUBLIC = (
    ("GET", "/health"),
    ("GET", "/v1/models"),
    ("GET", "/v1/subscriptions"),
    ("GET", "/v1/model/llama-3/subscriptions"),
    ("POST", "/v1/api-keys"),
    ("GET", "/v1/api-keys/config"),
    ("POST", "/v1/api-keys/bulk-revoke"),
    ("POST", "/v1/api-keys/search"),
    ("GET", "/v1/api-keys/key-123"),
    ("DELETE", "/v1/api-keys/key-123"),
)
# What the reference's clients call without /maas-api.
BARE = ("/v1/models", "/v1/subscriptions", "/v1/api-keys")
# What must never be reached from the Gateway.
PRIVATE = (
    "/internal/v1/api-keys/validate",
    "/internal/v1/api-keys/cleanup",
    "/internal/v1/tenants/b/api-keys",
    "/internal/v1/subscriptions/select",
    "/v1/tenants",
)
# Ways to spell a private path that a Gateway normalises to something else.
SPELLINGS = (
    "{p}",
    "/maas-api{p}",
    "/maas-api/{p}",
    "/maas-api/.{p}",
    "/maas-api/v1/..{p}",
    "/maas-api/v1/models/../..{p}",
    "/maas-api/v1/api-keys/../..{p}",
    "/maas-api/v1/api-keys/x/../../..{p}",
    "/maas-api/v1/model/../..{p}",
    "/maas-api/health/..{p}",
    "/maas-api//v1/api-keys/../..{p}",
    "/v1/api-keys/../..{p}",
    "/v1/models/../..{p}",
    "/./v1/../{p}",
    "//{p}",
)


def normalised(path: str) -> str:
    """Slashes merged and dot segments removed (RFC 3986's remove_dot_segments), as a Gateway
    does first."""
    out: list[str] = []
    segments = [s for s in path.split("/") if s]
    for segment in segments:
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    trailing = path.endswith("/") and bool(segments) and segments[-1] not in (".", "..")
    return "/" + "/".join(out) + ("/" if trailing and out else "")


def prefix_matches(prefix: str, path: str) -> bool:
    base = prefix.rstrip("/")
    return path == base or path.startswith(base + "/") or (base == "" and path.startswith("/"))


def matched(rule: dict[str, Any], path: str) -> tuple[int, int, str] | None:
    """(1 for Exact else 0, length, value) of the rule's best match of ``path``, or None."""
    best = None
    for match in rule["matches"]:
        kind, value = match["path"]["type"], match["path"]["value"]
        hit = path == value if kind == "Exact" else prefix_matches(value, path)
        if hit:
            key = (int(kind == "Exact"), len(value), value)
            best = key if best is None else max(best, key)
    return best


def rewritten(rule: dict[str, Any], matched_value: str, path: str) -> str:
    for f in rule.get("filters") or []:
        spec = f["urlRewrite"]["path"]
        if spec["type"] == "ReplaceFullPath":
            return spec["replaceFullPath"]
        rest = path[len(matched_value.rstrip("/")) :]
        return (spec["replacePrefixMatch"].rstrip("/") + rest) or "/"
    return path


def backend_path(route: dict[str, Any], path: str) -> str | None:
    """The path maas-api receives for ``path`` as the Gateway matches it, or None: no rule."""
    candidates = [
        (key, rule) for rule in route["spec"]["rules"] if (key := matched(rule, path)) is not None
    ]
    if not candidates:
        return None
    (_, _, value), rule = max(candidates, key=lambda c: c[0])
    return rewritten(rule, value, path)


def the_route(ctx: PlatformContext) -> dict[str, Any]:
    [route] = [m.obj for m in render(ctx) if m.kind.kind == "HTTPRoute"]
    return route


def test_the_model_reads_the_old_catch_all_as_the_issue_found_it() -> None:
    # The route before docs/differences.md D33: the reader above lets the revocation through it.
    old = {
        "spec": {
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/maas-api"}}],
                    "filters": [
                        {
                            "type": "URLRewrite",
                            "urlRewrite": {
                                "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}
                            },
                        }
                    ],
                }
            ]
        }
    }
    path = "/maas-api/internal/v1/tenants/b/api-keys"
    assert backend_path(old, path) == "/internal/v1/tenants/b/api-keys"


@pytest.mark.parametrize(("method", "path"), PUBLIC)
def test_every_public_path_reaches_maas_api_as_itself(
    make_ctx: MakeContext, method: str, path: str
) -> None:
    route = the_route(make_ctx())
    assert backend_path(route, "/maas-api" + path) == path, method
    bare = any(prefix_matches(b, path) for b in BARE)
    assert backend_path(route, path) == (path if bare else None), method


@pytest.mark.parametrize("private", PRIVATE)
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_no_spelling_of_a_private_path_reaches_it(
    make_ctx: MakeContext, spelling: str, private: str
) -> None:
    route = the_route(make_ctx())
    raw = spelling.format(p=private)
    # A Gateway that normalises matches the clean path; one that does not passes the path on
    # as written, and maas-api's router matches that literally (routes.py).
    for seen, why in ((normalised(raw), "normalised"), (raw, "as written")):
        sent = backend_path(route, seen)
        assert sent is None or not reaches(sent), (raw, why, sent)


def reaches(path: str) -> bool:
    return path.startswith("/internal/") or path in ("/internal", "/v1/tenants", "/v1/tenants/")


def test_no_match_names_a_private_path(make_ctx: MakeContext) -> None:
    for ctx in (make_ctx(), make_ctx(tenant="models-as-a-service")):
        for rule in the_route(ctx)["spec"]["rules"]:
            for match in rule["matches"]:
                value = match["path"]["value"]
                assert match["path"]["type"] in ("Exact", "PathPrefix")
                assert "internal" not in value, value
                assert "tenants" not in value, value


def test_each_rewrite_stands_beside_one_match_of_its_kind(make_ctx: MakeContext) -> None:
    # The Gateway API refuses a ReplacePrefixMatch beside anything but one PathPrefix match.
    for rule in the_route(make_ctx())["spec"]["rules"]:
        for f in rule.get("filters") or []:
            kind = f["urlRewrite"]["path"]["type"]
            [match] = rule["matches"]
            want = "PathPrefix" if kind == "ReplacePrefixMatch" else "Exact"
            assert match["path"]["type"] == want


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/a//b", "/a/b"),
        ("/a/./b", "/a/b"),
        ("/a/b/../c", "/a/c"),
        ("/../a", "/a"),
        ("/a/", "/a/"),
        ("/a/b/..", "/a"),
    ],
)
def test_the_normalisation_the_reader_assumes(raw: str, expected: str) -> None:
    assert normalised(raw) == expected


def test_whatever_is_routed_is_left_alone_by_the_default_deny(make_ctx: MakeContext) -> None:
    # The TokenRateLimitPolicy denies every path outside these prefixes (docs/platform.md §7):
    # a routed path outside them would be routed and then refused.
    allowed = (API_PREFIX, *ROUTE_PREFIXES)
    for rule in the_route(make_ctx())["spec"]["rules"]:
        for match in rule["matches"]:
            value = match["path"]["value"]
            assert any(prefix_matches(p, value) for p in allowed), value
