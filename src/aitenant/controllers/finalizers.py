"""Adding and removing one of our finalizers without clobbering anyone else's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from aitenant.runtime.client.api_errors import is_not_found


async def ensure_finalizer(
    client: AsyncClient,
    resource: Any,
    obj: dict[str, Any],
    finalizer: str,
    remember: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """``obj`` with ``finalizer`` appended (merge patch guarded by its resourceVersion), or
    ``obj`` itself when it already has it. The updated copy is handed to ``remember``."""
    meta = obj["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    if finalizer in finalizers:
        return obj
    patch = {
        "metadata": {
            "finalizers": [*finalizers, finalizer],
            "resourceVersion": meta["resourceVersion"],
        }
    }
    updated = dict(
        await client.patch(
            resource, meta["name"], patch, namespace=meta["namespace"], patch_type=PatchType.MERGE
        )
    )
    remember(updated)
    return updated


async def drop_finalizer(
    client: AsyncClient,
    resource: Any,
    obj: dict[str, Any],
    finalizer: str,
    remember: Callable[[dict[str, Any]], None],
) -> None:
    """Merge-patch ``finalizer`` out of ``obj``; its resourceVersion guards the list we write.
    The answer is handed to ``remember``: for the last finalizer it is the object at the version
    it is deleted at, so a pass queued meanwhile finds nothing left to do. An object already
    gone is fine; a conflict is raised (the caller retries on a fresh copy).
    """
    meta = obj["metadata"]
    remaining = [f for f in meta.get("finalizers") or [] if f != finalizer]
    patch = {
        "metadata": {"finalizers": remaining or None, "resourceVersion": meta["resourceVersion"]}
    }
    try:
        updated = await client.patch(
            resource, meta["name"], patch, namespace=meta["namespace"], patch_type=PatchType.MERGE
        )
    except ApiError as exc:
        if not is_not_found(exc):
            raise
        return
    remember(dict(updated))
