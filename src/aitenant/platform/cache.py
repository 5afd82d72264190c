"""Informers on the objects the platform writes: its read cache and its drift alarm.

One informer per (kind, namespace) the platform renders into, selecting
``app.kubernetes.io/managed-by=aitenant-controller``, indexed by tenant (the tracking labels).
The reconciler reads live copies here instead of asking the API server, so reconciling an
unchanged tenant costs neither writes nor reads of its objects, and any change to one of them
(a user's edit, a deletion, the Deployment turning Available) re-queues its config at once.

Until an informer has synced (or while its CRD is not installed) it answers "unknown", and the
caller reads from the API instead.

AuthPolicies in the gateway namespace are cached without the selector: the Gateway AuthPolicy is
create-only and may exist without our labels (the default tenant's shared one, one made before
the tenant), and only a cache that sees every one can say it is missing, sparing a new tenant a
GET before its create. The gateway namespace holds few AuthPolicies.
"""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient

from aitenant import contract
from aitenant.platform import kinds
from aitenant.platform.apply import UNKNOWN, get_dict_or_none, tenant_of
from aitenant.platform.kinds import Kind
from aitenant.runtime.cache.informer import Handler, Informer

Obj = dict[str, Any]
TENANT_INDEX = "tenant"
# A missing CRD makes its informer retry; at this pace it logs rarely.
CRD_RETRY_MAX = 300.0


def tenant_index_value(tenant_namespace: str, tenant: str) -> str:
    return f"{tenant_namespace}/{tenant}"


def _tenant_of(obj: Obj) -> list[str]:
    owner = tenant_of(obj)
    return [tenant_index_value(owner[1], owner[0])] if owner and all(owner) else []


class PlatformCache:
    def __init__(self, client: AsyncClient, *, infra_namespace: str, gateway_namespace: str):
        self.client = client
        selector: dict[str, str] = {contract.LABEL_MANAGED_BY: contract.PLATFORM_MANAGED_BY_VALUE}
        scopes = kinds.platform_scopes(infra_namespace, gateway_namespace)
        # The one scope cached whole (no selector), so "not cached" there means "does not exist".
        whole = (kinds.AUTH_POLICY, gateway_namespace)
        self._informers: dict[tuple[Kind, str | None], Informer] = {}
        for kind, namespace in scopes:
            if (kind, namespace) in self._informers:  # infra and gateway namespace may be one
                continue
            informer = Informer(
                client,
                kind.resource,
                namespace=namespace,
                labels=None if (kind, namespace) == whole else selector,
                max_backoff=30.0 if kind.built_in else CRD_RETRY_MAX,
            )
            informer.add_index(TENANT_INDEX, _tenant_of)
            self._informers[(kind, namespace)] = informer

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    @property
    def built_in_informers(self) -> list[Informer]:
        """The informers that sync on any cluster: built-in kinds. One of a CRD's kinds waits
        for its CRD."""
        return [informer for (kind, _), informer in self._informers.items() if kind.built_in]

    def add_handler(self, handler: Handler) -> None:
        for informer in self._informers.values():
            informer.add_handler(handler)

    def _informer(self, kind: Kind, namespace: str | None) -> Informer | None:
        informer = self._informers.get((kind, namespace if kind.namespaced else None))
        if informer is None or not informer.synced.is_set():
            return None
        return informer

    def get(self, kind: Kind, namespace: str | None, name: str, *, unlabelled: bool = False) -> Any:
        """The cached object, None when it does not exist, UNKNOWN when not cached.
        ``unlabelled``: the object may exist without our labels (a create-only one), so only a
        scope cached whole can say it does not exist."""
        informer = self._informer(kind, namespace)
        if informer is None:
            return UNKNOWN
        if unlabelled and informer.labels is not None:
            return UNKNOWN
        obj = informer.get(namespace or "" if kind.namespaced else "", name)
        if obj is None:
            return None
        return {"apiVersion": kind.api_version, "kind": kind.kind, **obj}

    async def read(
        self, kind: Kind, namespace: str | None, name: str, *, unlabelled: bool = False
    ) -> Obj | None:
        """The object from the cache when it knows (``get``), else from the API; None when it
        does not exist."""
        found = self.get(kind, namespace, name, unlabelled=unlabelled)
        if found is not UNKNOWN:
            return found
        return await get_dict_or_none(self.client, kind, name, namespace)

    def tracked(self, tenant_namespace: str, tenant: str) -> list[tuple[Kind, Obj]] | None:
        """Every cached object of one tenant; None while any informer is not synced."""
        found: list[tuple[Kind, Obj]] = []
        value = tenant_index_value(tenant_namespace, tenant)
        for (kind, _), informer in self._informers.items():
            if not informer.synced.is_set():
                if kind in kinds.OPTIONAL:
                    continue  # an optional CRD that may never be installed
                return None
            found.extend(
                (kind, {"apiVersion": kind.api_version, "kind": kind.kind, **obj})
                for obj in informer.by_index(TENANT_INDEX, value)
            )
        return found
