"""The one module that reaches into lightkube's private API, checked against one version.

lightkube has no public hook for three things we need; each is a small function here, so a
lightkube upgrade is checked in one place (``tests/unit/runtime/client/test_lightkube_private.py``
fails when the locked version is no longer ``VERIFIED_VERSION``; re-check every function
below against the new release, then update it):

* ``http_client``: the httpx client lightkube sends through (request counting, discovery);
* ``resource_kind``, ``resource_class`` and ``dict_resource``: a resource class's ``_api_info``
  (its kind; a generic class built for a kind we know only at run time, with a status
  subresource; the generic twin of a typed class);
* ``delete_with_body``: a DELETE carrying a ``DeleteOptions`` body (lightkube sends none),
  built, authenticated and error-mapped (``ApiError``) by lightkube's own request machinery.
"""

from __future__ import annotations

from typing import Any

import httpx2
from lightkube import AsyncClient
from lightkube.core.resource import ApiInfo, NamespacedResource
from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericGlobalStatus,
    GenericNamespacedResource,
    GenericNamespacedStatus,
    create_api_info,
)

# The lightkube release every function below was checked against (uv.lock pins it).
VERIFIED_VERSION = "1.0.1"


def http_client(client: AsyncClient) -> httpx2.AsyncClient:
    """The httpx client behind ``client``: its base URL, authentication and TLS settings."""
    return client._client._client  # pyright: ignore[reportPrivateUsage]


def resource_kind(resource: Any) -> str:
    """The ``kind`` of a lightkube resource class (``Namespace`` → ``"Namespace"``)."""
    return resource._api_info.resource.kind


def resource_class(
    group: str, version: str, kind: str, plural: str, *, namespaced: bool
) -> type[Any]:
    """A generic resource class for one kind, with ``.Status`` for its status subresource.

    Unlike lightkube's ``create_*_resource`` it registers nothing globally, so the same kind
    may also be declared elsewhere (``aitenant.resources``) without a clash.
    """
    if namespaced:
        base, status_base = GenericNamespacedResource, GenericNamespacedStatus
    else:
        base, status_base = GenericGlobalResource, GenericGlobalStatus
    info = create_api_info(group, version, kind, plural)
    status_info = ApiInfo(
        resource=info.resource,
        parent=info.resource,
        plural=info.plural,
        verbs=["get", "patch", "put"],
        action="status",
    )
    status = type(f"{kind}Status", (status_base,), {"_api_info": status_info})
    return type(kind, (base,), {"_api_info": info, "Status": status})


def dict_resource(resource: Any) -> Any:
    """The generic (dict) twin of a typed lightkube resource, same API path; generic classes
    are returned as they are. Lists and watches of the twin decode to dicts directly: about
    three times cheaper than lightkube's typed models turned back into dicts, which is what an
    informer keeps (docs/design.md §9.4)."""
    if issubclass(resource, dict):
        return resource
    info = resource._api_info
    return resource_class(
        info.resource.group,
        info.resource.version,
        info.resource.kind,
        info.plural,
        namespaced=issubclass(resource, NamespacedResource),
    )


async def delete_with_body(
    client: AsyncClient,
    resource: Any,
    name: str,
    *,
    namespace: str | None,
    body: dict[str, Any],
) -> None:
    """DELETE ``name`` with ``body`` (a ``DeleteOptions``); errors raise ``ApiError``."""
    generic: Any = client._client  # pyright: ignore[reportPrivateUsage]
    request = generic.prepare_request("delete", res=resource, name=name, namespace=namespace)
    request.data = body
    response = await generic.send(generic.build_adapter_request(request))
    generic.handle_response("delete", response, request)
