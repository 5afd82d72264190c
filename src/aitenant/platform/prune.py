"""Finding a tenant's platform objects (by their tracking labels) and pruning those no longer
rendered; the config's cleanup deletes what ``TrackedObjects.find`` returns.

From the platform cache when it is synced (no request unless something is deleted); else by
listing every kind in every place of ``kinds.platform_scopes``, which pruning does only when the
rendered set changed since the last pass of this process. CronJobs, which ``tracked`` leaves
out, are read by name (their name never changes, so pruning never needs them).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aitenant.platform import kinds
from aitenant.platform.apply import Applier
from aitenant.platform.cache import PlatformCache
from aitenant.platform.render import Ref, tracking_labels
from aitenant.resources import Obj
from aitenant.runtime.control.controller import Key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tenant:
    """Who a config belongs to, as far as the platform needs to know."""

    name: str
    namespace: str  # the tenant namespace (the config's own)

    @property
    def selector(self) -> dict[str, str]:
        return tracking_labels(self.name, self.namespace)


class TrackedObjects:
    def __init__(
        self,
        applier: Applier,
        cache: PlatformCache,
        *,
        infra_namespace: str,
    ) -> None:
        self.applier = applier
        self.cache = cache
        self.infra_namespace = infra_namespace
        # What each config rendered on its last successful pass in this process: without a
        # synced cache, pruning (one LIST per kind) is needed only when this changes.
        self._rendered: dict[Key, frozenset[Ref]] = {}

    def forget(self, key: Key) -> None:
        """The config is gone or its last apply failed: list again on its next prune."""
        self._rendered.pop(key, None)

    async def find(
        self,
        tenant: Tenant,
        gateway_namespace: str,
    ) -> list[tuple[kinds.Kind, Obj]]:
        """Every platform object of the tenant: from the cache when it is synced, else by
        listing each kind with the tracking labels."""
        cached = self.cache.tracked(tenant.namespace, tenant.name)
        if cached is not None:
            return cached
        found: list[tuple[kinds.Kind, Obj]] = []
        for scope in kinds.platform_scopes(self.infra_namespace, gateway_namespace):
            found.extend(
                (scope[0], obj) for obj in await self.applier.list_tracked(scope, tenant.selector)
            )
        return found

    async def prune(
        self,
        key: Key,
        tenant: Tenant,
        refs: frozenset[Ref],
        gateway_namespace: str,
    ) -> None:
        """Delete the tenant's objects that are no longer rendered."""
        synced = self.cache.tracked(tenant.namespace, tenant.name) is not None
        if not synced and self._rendered.get(key) == refs:
            return
        tracked = await self.find(tenant, gateway_namespace)
        pruned = await self.applier.prune(tracked, set(refs))
        if pruned:
            log.info("maastenantconfig %s: pruned %s", key, ", ".join(pruned))
        self._rendered[key] = refs
