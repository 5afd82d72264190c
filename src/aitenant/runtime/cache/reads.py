"""Reads served from informers where one watches the object, from the API otherwise.

A read-through cache in controller-runtime's manner: a hit in a synced informer that covers the
namespace is served from memory. A miss is an answer ("does not exist") when the informer sees
every object the read could find (no label selector; a field selector on that very name), or
when it was served with ``trust_misses`` because every caller creates on None and falls back
to a read on AlreadyExists; otherwise (the object may exist outside the informer's label
selector, or the informer's watch is down and events are being missed) it asks the API. Like a
hit, a miss may be a little stale: callers compare and write, and a write against a stale copy
is refused (resourceVersion, AlreadyExists) or repeated harmlessly (merge patch). Without
informers it is simply "get, or None when it does not exist".
"""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient

from aitenant.runtime.cache.informer import Informer
from aitenant.runtime.client.requests import LIST_PAGE, get_or_none


def _plain(obj: Any) -> Any:
    """Generic resources (CRDs) as plain dicts, lightkube models as they are."""
    return dict(obj) if isinstance(obj, dict) else obj


class CachedReads:
    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self._informers: dict[Any, Informer] = {}
        self._trusted: set[Any] = set()  # resources whose informer's misses are answers

    def serve(self, informer: Informer, *, trust_misses: bool = False) -> None:
        self._informers[informer.resource] = informer
        if trust_misses:
            self._trusted.add(informer.resource)

    def informer(self, resource: Any, namespace: str | None) -> Informer | None:
        """The synced informer that watches ``resource`` in ``namespace``, if any."""
        informer = self._informers.get(resource)
        if informer is None or not informer.synced.is_set():
            return None
        return informer if informer.namespace in ("*", namespace) else None

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        """The object (a lightkube model, or a dict for a CRD), or None if it does not exist."""
        informer = self.informer(resource, namespace)
        hit = informer.get(namespace or "", name) if informer is not None else None
        if hit is not None:
            return _plain(resource.from_dict(hit))
        if informer is not None and not informer.interrupted and self._sees_all(informer, name):
            return None
        return _plain(await get_or_none(self.client, resource, name, namespace))

    def _sees_all(self, informer: Informer, name: str) -> bool:
        """A miss in ``informer`` means the object does not exist (as of its last event)."""
        if informer.resource in self._trusted:
            return True
        return informer.labels is None and informer.fields in (None, {"metadata.name": name})

    def remember(self, resource: Any, obj: Any) -> None:
        """A copy one of our writes returned: served until the watch delivers it or newer."""
        informer = self._informers.get(resource)
        if informer is not None:
            informer.remember(obj)

    async def list(
        self,
        resource: Any,
        namespace: str,
        labels: dict[str, str],
        *,
        index: tuple[str, str] | None = None,
    ) -> list[Any]:
        """Every ``resource`` in ``namespace`` with ``labels``: from an informer that watches
        exactly that, else one LIST. With ``index`` (name, value), an informer that has that
        index answers only the objects filed under the value: a subset of the answer that
        still holds every object the caller looks for (which filters it)."""
        informer = self.informer(resource, namespace)
        if (
            informer is not None
            and informer.namespace == namespace
            and informer.labels == labels
            and informer.fields is None
        ):
            if index is not None and informer.has_index(index[0]):
                return [resource.from_dict(obj) for obj in informer.by_index(*index)]
            return [resource.from_dict(obj) for obj in informer.list()]
        selector: Any = (
            labels  # lightkube's LabelSelector also takes operators; ours are equalities
        )
        return [
            obj
            async for obj in self.client.list(
                resource, namespace=namespace, labels=selector, chunk_size=LIST_PAGE
            )
        ]
