"""Reads served from informers where one watches the object, from the API otherwise.

A read-through cache in controller-runtime's manner, scoped to be safe without any reasoning
at the call site: a hit in a synced informer that covers the namespace is served from memory;
a miss (the object may exist outside the informer's label selector, or the watch may not have
delivered it yet) asks the API. A hit may be a little stale: callers compare and write, and a
write against a stale copy is refused (resourceVersion) or repeated harmlessly (merge patch).
"""

from __future__ import annotations

from typing import Any

from lightkube import ApiError, AsyncClient

from aitenant.errors import is_not_found
from aitenant.runtime.informer import Informer, Obj


class CachedReads:
    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self._informers: dict[Any, Informer] = {}
        self.api_reads = 0  # reads that went to the API (for benchmarks)

    def serve(self, informer: Informer) -> None:
        self._informers[informer.resource] = informer

    def cached(self, resource: Any, name: str, namespace: str | None = None) -> Obj | None:
        """The informer's copy, or None when no synced informer holds it."""
        informer = self._informers.get(resource)
        if informer is None or not informer.synced.is_set():
            return None
        if informer.namespace not in ("*", namespace):
            return None
        return informer.get(namespace or "", name)

    def informer(self, resource: Any) -> Informer | None:
        """The synced informer that watches ``resource``, if any."""
        informer = self._informers.get(resource)
        return informer if informer is not None and informer.synced.is_set() else None

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        """The object (typed as ``resource``), or None if it does not exist."""
        hit = self.cached(resource, name, namespace)
        if hit is not None:
            return resource.from_dict(hit)
        self.api_reads += 1
        try:
            if namespace is None:
                return await self.client.get(resource, name)
            return await self.client.get(resource, name, namespace=namespace)
        except ApiError as exc:
            if is_not_found(exc):
                return None
            raise
