"""Removing one of our finalizers without clobbering anyone else's."""

from __future__ import annotations

from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from aitenant.errors import is_not_found


async def drop_finalizer(
    client: AsyncClient, resource: Any, obj: dict[str, Any], finalizer: str
) -> None:
    """Merge-patch ``finalizer`` out of ``obj``; its resourceVersion guards the list we write.

    A conflict is raised (the caller retries on a fresh copy); an object already gone is fine.
    """
    meta = obj["metadata"]
    remaining = [f for f in meta.get("finalizers") or [] if f != finalizer]
    patch = {
        "metadata": {"finalizers": remaining or None, "resourceVersion": meta["resourceVersion"]}
    }
    try:
        await client.patch(
            resource, meta["name"], patch, namespace=meta["namespace"], patch_type=PatchType.MERGE
        )
    except ApiError as exc:
        if not is_not_found(exc):
            raise
