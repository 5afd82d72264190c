"""API requests lightkube's client has no method for, built with its own request machinery.

``get_or_none``: a GET where "not found" is an answer (None), not an error.

``merge_patch``: a JSON merge patch, its answer as a plain dict.

``delete_with_preconditions``: a DELETE whose ``DeleteOptions`` body carries preconditions, so
the API server refuses (409) unless the object still has the UID and resourceVersion the
caller decided on. lightkube's ``delete`` sends no body; ``lightkube_private.delete_with_body``
reuses its request building, authentication and error mapping (``ApiError``), so callers see
the same exceptions.

``LIST_PAGE``: the page size of every LIST the controller sends (lightkube's ``chunk_size``), so
a list of thousands of objects never comes in one response (docs/design.md §9.5).
"""

from __future__ import annotations

from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from aitenant.runtime.client.api_errors import is_not_found
from aitenant.runtime.client.lightkube_private import delete_with_body

# Objects per LIST request (the API server's continue tokens keep one snapshot). A page is held
# decoded while it is stored: at 250, the four lists of a restart with 1,000 tenants held some
# 40 MB of pages at once, the process's peak (docs/design.md §9.5).
LIST_PAGE = 100


async def get_or_none(
    client: AsyncClient, resource: Any, name: str, namespace: str | None = None
) -> Any:
    """The object as lightkube returns it, or None when it does not exist."""
    try:
        if namespace is None:
            return await client.get(resource, name)
        return await client.get(resource, name, namespace=namespace)
    except ApiError as exc:
        if is_not_found(exc):
            return None
        raise


async def merge_patch(
    client: AsyncClient, resource: Any, name: str, patch: Any, *, namespace: str
) -> dict[str, Any]:
    """Merge-patch the namespaced object ``name``; the object the API server returned."""
    return dict(
        await client.patch(resource, name, patch, namespace=namespace, patch_type=PatchType.MERGE)
    )


async def delete_with_preconditions(
    client: AsyncClient,
    resource: Any,
    name: str,
    *,
    namespace: str | None = None,
    uid: str | None = None,
    resource_version: str | None = None,
) -> None:
    """Delete ``name`` only if it still has ``uid`` and ``resource_version`` (when given)."""
    preconditions = {
        key: value for key, value in (("uid", uid), ("resourceVersion", resource_version)) if value
    }
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}
    await delete_with_body(client, resource, name, namespace=namespace, body=body)
