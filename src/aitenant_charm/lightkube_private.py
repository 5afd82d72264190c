"""The charm's only reach into lightkube's private API, checked against one version.

The charm runs lightkube's synchronous ``Client``; the controller's twin of this module
(``aitenant.runtime.client.lightkube_private``, for ``AsyncClient``) lies outside what the charm may
import. lightkube has no public call for three things the charm needs; each is a small
function here, so a lightkube upgrade is checked in one place
(``tests/unit/charm/test_charm_lightkube.py`` fails when the locked version is no longer
``VERIFIED_VERSION``; re-check every function below against the new release, then update it):

* ``api_version``: the API server's ``GET /version`` answer (lightkube has no call for it);
* ``count_objects``: a single-item list read for its ``remainingItemCount`` (lightkube's
  ``list`` pages through every object and hides the list metadata);
* ``close``: close the client's connections (``Client`` has no public close).
"""

from __future__ import annotations

from typing import Any

import httpx2
from lightkube import Client

# The lightkube release every function below was checked against (uv.lock pins it).
VERIFIED_VERSION = "1.0.1"


def _http_client(client: Client) -> httpx2.Client:
    """The httpx client behind ``client``: its base URL, authentication and TLS settings."""
    return client._client._client  # pyright: ignore[reportPrivateUsage]


def api_version(client: Client) -> dict[str, Any]:
    """The API server's ``/version`` document; HTTP errors raise ``httpx2.HTTPError``."""
    response = _http_client(client).get("/version")
    response.raise_for_status()
    return response.json()


def count_objects(client: Client, res: Any, namespace: str = "*") -> int:
    """Count objects of ``res`` with one single-item list: the item it returns plus the
    ``remainingItemCount`` the API server sends with the continue token. Errors raise
    ``ApiError``."""
    generic: Any = client._client  # pyright: ignore[reportPrivateUsage]
    request = generic.prepare_request("list", res=res, namespace=namespace, params={"limit": 1})
    response = generic.send(generic.build_adapter_request(request))
    generic.raise_for_status(response)
    body = response.json()
    remaining = (body.get("metadata") or {}).get("remainingItemCount") or 0
    return len(body.get("items") or []) + int(remaining)


def close(client: Client) -> None:
    """Close ``client``'s connections."""
    _http_client(client).close()
