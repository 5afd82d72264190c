"""What the API server's audit log (``LocalCluster(audit=True)``) says each client sent, and raw
reads of any object it names, served kind or not.

``requests`` lists the requests on named objects; ``Audit`` counts every request one user sent
(lists and discovery too), by verb and resource, as the benchmarks print them;
``requests_by_client`` counts every client's."""

from __future__ import annotations

import datetime as dt
import json
import ssl
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools.cluster import ADMIN_TOKEN

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# A "create" of these is a question to the API server (who am I, may this user do that): it
# stores nothing, so it is not a write.
REVIEW_RESOURCES = frozenset(
    {
        "selfsubjectreviews",
        "selfsubjectaccessreviews",
        "selfsubjectrulesreviews",
        "subjectaccessreviews",
        "localsubjectaccessreviews",
        "tokenreviews",
    }
)


@dataclass(frozen=True)
class Request:
    user: str
    verb: str
    resource: str  # plural.group ("deployments.apps"; "secrets" for the core group)
    namespace: str
    name: str
    group_version: str  # "apps/v1", "/v1" for the core group
    code: int
    at: float  # when the API server received it (Unix time)

    @property
    def key(self) -> str:
        return f"{self.resource}/{self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        """The object's REST path."""
        group, version = self.group_version.split("/")
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        ns = f"/namespaces/{self.namespace}" if self.namespace else ""
        return f"{base}{ns}/{self.resource.split('.', 1)[0]}/{self.name}"


def requests(log: Path, *, since: float = 0.0, writes_only: bool = True) -> list[Request]:
    """Every completed request on a named object received at or after ``since`` (writes only by
    default), Events left out."""
    found = []
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event.get("stage") != "ResponseComplete":
            continue
        if writes_only and event.get("verb") not in WRITE_VERBS:
            continue
        ref = event.get("objectRef") or {}
        body = (event.get("requestObject") or {}).get("metadata") or {}
        name = ref.get("name") or body.get("name", "")
        if not name or not ref.get("resource") or ref["resource"] == "events":
            continue
        at = dt.datetime.fromisoformat(event["requestReceivedTimestamp"]).timestamp()
        if at < since:
            continue
        group = ref.get("apiGroup", "")
        found.append(
            Request(
                user=event.get("user", {}).get("username", ""),
                verb=event["verb"],
                resource=ref["resource"] + (f".{group}" if group else ""),
                namespace=ref.get("namespace", ""),
                name=name,
                group_version=f"{group}/{ref.get('apiVersion', '')}",
                code=int((event.get("responseStatus") or {}).get("code") or 0),
                at=at,
            )
        )
    return found


def get_raw(server: str, path: str) -> dict[str, Any] | None:
    """GET ``path`` as the cluster's admin; None on 404."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    req = urllib.request.Request(server + path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


class Audit:
    """``user``'s requests in the API server's audit log (watches left out), by verb and
    resource: ``take`` reads what was logged since its last call."""

    def __init__(self, path: Path, user: str) -> None:
        self.path = path
        self.user = user
        self.offset = 0

    def take(self, window: tuple[float, float] | None = None) -> Counter[str]:
        """Requests since the last call; with ``window`` (two ``time.time()`` stamps), only those
        the API server received within it."""
        counts: Counter[str] = Counter()
        with self.path.open() as log:
            log.seek(self.offset)
            for line in log:
                if not line.endswith("\n"):
                    break
                self.offset += len(line.encode())
                event = json.loads(line)
                if event.get("stage") != "ResponseComplete":
                    continue
                if event.get("user", {}).get("username") != self.user:
                    continue
                verb = event.get("verb", "?")
                if verb == "watch":
                    continue
                if window is not None:
                    received = audit_time(event.get("requestReceivedTimestamp", ""))
                    if not window[0] <= received <= window[1]:
                        continue
                ref = event.get("objectRef") or {}
                # A request with no object (discovery, /version) is named by its path.
                resource = ref.get("resource") or event.get("requestURI", "?").split("?")[0]
                if ref.get("subresource"):
                    resource += "/" + ref["subresource"]
                counts[f"{verb} {resource}"] += 1
        return counts


def requests_by_client(path: Path, window: tuple[float, float]) -> Counter[str]:
    """Every client's requests (watches left out) that the API server received within
    ``window`` (two ``time.time()`` stamps): who made the API server work. A client is its
    user agent's product (with the controller's name for kube-controller-manager's) and its
    user: the local control plane's components share the admin user."""
    counts: Counter[str] = Counter()
    with path.open() as log:
        for line in log:
            if not line.endswith("\n"):
                break
            event = json.loads(line)
            if event.get("stage") != "ResponseComplete" or event.get("verb") == "watch":
                continue
            if window[0] <= audit_time(event.get("requestReceivedTimestamp", "")) <= window[1]:
                counts[client_of(event)] += 1
    return counts


def client_of(event: dict[str, Any]) -> str:
    """``product[/controller] (user)`` from an audit event's user agent and user, e.g.
    ``kube-controller-manager/deployment-controller (admin)`` for the agent
    ``kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/8f2c1e0/deployment-controller``."""
    agent = event.get("userAgent", "")
    product = agent.split("/", 1)[0] or "?"
    build = agent.rsplit(" ", 1)[-1].split("/")
    if len(build) > 2 and build[0] == "kubernetes":
        product += "/" + build[2]
    return f"{product} ({event.get('user', {}).get('username', '?')})"


def audit_time(stamp: str) -> float:
    """An audit event's timestamp (RFC 3339, microseconds) as ``time.time()`` seconds."""
    return dt.datetime.fromisoformat(stamp).timestamp()


def is_write(key: str) -> bool:
    """Whether an ``Audit.take`` key ("verb resource") stores something: reviews do not."""
    verb, _, resource = key.partition(" ")
    return verb in WRITE_VERBS and resource not in REVIEW_RESOURCES


def writes(counts: Counter[str]) -> int:
    """The writes among an ``Audit.take`` answer."""
    return sum(n for key, n in counts.items() if is_write(key))


def breakdown(counts: Counter[str], tenants: int) -> str:
    """An ``Audit.take`` answer per tenant, most frequent first."""
    return ", ".join(f"{k} {v / tenants:.2f}" for k, v in counts.most_common())
