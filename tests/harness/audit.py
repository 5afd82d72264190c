"""What the API server's audit log (``LocalCluster(audit=True)``) says each client sent, and raw
reads of any object it names, served kind or not."""

from __future__ import annotations

import datetime as dt
import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.cluster import ADMIN_TOKEN

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


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
