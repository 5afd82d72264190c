"""Reading a rendered tenant platform in the rendering tests (test_render*.py): its objects by
kind and name, the one object of a kind, a Deployment's environment.
"""

from __future__ import annotations

from typing import Any

from aitenant.platform.render import (
    PlatformContext,
    render,
)

TRACKING = ("maas.opendatahub.io/tenant-name", "maas.opendatahub.io/tenant-namespace")


def objects(ctx: PlatformContext) -> dict[tuple[str, str], dict[str, Any]]:
    """Rendered objects by (kind, name)."""
    return {(m.kind.kind, m.name): m.obj for m in render(ctx)}


def one(ctx: PlatformContext, kind: str, namespace: str | None = None) -> dict[str, Any]:
    found = [
        m.obj
        for m in render(ctx)
        if m.kind.kind == kind and (namespace is None or m.namespace == namespace)
    ]
    assert len(found) == 1, [m.obj["metadata"]["name"] for m in render(ctx)]
    return found[0]


def env_of(deployment: dict[str, Any]) -> dict[str, Any]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
