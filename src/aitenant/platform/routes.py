"""The paths of maas-api that a tenant's Gateway routes to it (docs/platform.md §5,
docs/differences.md D33): its public API only, as its router declares it.

maas-api serves ``/internal/v1/...`` (key validation, key cleanup, a tenant's key revocation,
subscription selection) with no authentication of its own: those are for Authorino and our
CronJob inside the cluster, so nothing on the Gateway may lead there. Neither may
``/v1/tenants``, which is meant for in-cluster callers too. Every match below is safe against
the spellings a Gateway normalises before it matches (``//``, ``/./``, ``/x/../``):

* an Exact match equals one public path after normalisation, so it is that path;
* a PathPrefix match compares whole segments (``/v1/api-keys`` matches ``/v1/api-keys`` and
  ``/v1/api-keys/...``, never ``/v1/api-keysx``), so a normalised path it matches lies under
  a public prefix, and normalisation has already removed every ``..`` that could climb out;
* under ``/maas-api`` each rule rewrites only its own prefix (``/maas-api/v1/api-keys`` →
  ``/v1/api-keys``), never ``/maas-api`` → ``/``, so what maas-api receives still starts with
  the public path that matched. ``/maas-api/v1/../internal/...`` normalises to
  ``/maas-api/internal/...``, which no rule matches.

A Gateway that did not normalise would pass ``/v1/api-keys/../../internal/...`` on as written;
maas-api's router matches the literal path (it does not clean it), so that reaches no
``/internal/`` handler either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

MatchType = Literal["Exact", "PathPrefix"]

API_PREFIX: Final = "/maas-api"


@dataclass(frozen=True)
class PublicPath:
    """One public path of maas-api's router and how the Gateway matches it."""

    path: str
    match: MatchType
    # Also routed as is, without /maas-api: the paths the reference's clients call bare. Each
    # is one of the prefixes the TokenRateLimitPolicy leaves alone (``ROUTE_PREFIXES``).
    bare: bool


# maas-api's router at the reference commit (docs/differences.md D33): GET /health; GET /v1/models;
# GET /v1/subscriptions; GET /v1/model/{model-id}/subscriptions; under /v1/api-keys: POST
# (create), GET /config, POST /bulk-revoke, POST /search, GET and DELETE /{id}.
PUBLIC_PATHS: Final = (
    PublicPath("/health", "Exact", bare=False),
    PublicPath("/v1/models", "Exact", bare=True),
    PublicPath("/v1/subscriptions", "Exact", bare=True),
    PublicPath("/v1/model", "PathPrefix", bare=False),
    PublicPath("/v1/api-keys", "PathPrefix", bare=True),
)


@dataclass(frozen=True)
class PrefixedRule:
    """A rule for ``/maas-api<path>``: the match, and the rewrite back to ``<path>``."""

    match: MatchType
    value: str
    rewrite: Literal["ReplaceFullPath", "ReplacePrefixMatch"]
    target: str


def bare_matches() -> list[tuple[MatchType, str]]:
    """The matches of the rule that serves public paths as they are."""
    return [(p.match, p.path) for p in PUBLIC_PATHS if p.bare]


def prefixed_rules() -> list[PrefixedRule]:
    """One rule per public path under ``/maas-api``. The Gateway API lets a ReplacePrefixMatch
    rewrite stand only beside one PathPrefix match, and an Exact match is rewritten whole."""
    return [
        PrefixedRule(
            p.match,
            API_PREFIX + p.path,
            "ReplaceFullPath" if p.match == "Exact" else "ReplacePrefixMatch",
            p.path,
        )
        for p in PUBLIC_PATHS
    ]
