"""The one status writer of both reconcilers (AITenant and MaasTenantConfig).

A pass works on ``status`` (a copy of what the object holds) and ends with ``flush``, which
replaces the whole status subresource only when it differs from what was last written: a pass
with nothing to do writes nothing. The status is entirely ours, so on a conflict (our copy was
stale, often our own previous write not yet seen by the informer) it is written over the latest
object, unless that already holds it.

With an ``EventRecorder`` every change of (phase, Ready reason) is announced by an Event
(docs/differences.md D8); the MaasTenantConfig reconciler records none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lightkube import ApiError, AsyncClient

from aitenant import contract
from aitenant.controllers import conditions
from aitenant.controllers.conditions import Status
from aitenant.resources import Obj
from aitenant.runtime.client.api_errors import is_conflict
from aitenant.runtime.client.events import EventRecorder

Reason = contract.Reason
WARNING_PHASES = {contract.PHASE_FAILED}
WARNING_REASONS = {Reason.DELETION_BLOCKED}
# Reasons announced by an Event of their own (AITenantCleanupForced, docs/contract.md §5.5).
SILENT_REASONS = {Reason.CLEANUP_FORCED}


class StatusWriter:
    """Holds the status as last written and writes the whole status only when it differs."""

    def __init__(
        self,
        client: AsyncClient,
        resource: Any,
        obj: Obj,
        generation: int,
        remember: Callable[[Obj], None],
        *,
        events: EventRecorder | None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.events = events
        self.remember = remember
        self.obj = obj
        self.generation = generation
        self.written: Status = conditions.snapshot(obj.get("status") or {})
        self.status: Status = conditions.snapshot(self.written)

    def set_phase(self, phase: str, reason: str, message: str) -> None:
        conditions.set_phase(self.status, phase, reason, message, self.generation)

    def rebase(self, obj: Obj) -> None:
        """The object was written (not its status) during the pass: continue from that copy."""
        self.obj = obj
        self.remember(obj)
        self.generation = int(obj["metadata"].get("generation", self.generation))

    async def _replace_status(self, body: Obj) -> Obj:
        meta = body["metadata"]
        updated = await self.client.replace(
            self.resource.Status.from_dict(body),
            meta["name"],
            namespace=meta["namespace"],
        )
        return dict(updated)

    async def flush(self) -> bool:
        """Write the status if it changed; True when a write was made."""
        if self.status == self.written:
            return False
        body = {**self.obj, "status": self.status}
        meta = self.obj["metadata"]
        try:
            updated = await self._replace_status(body)
        except ApiError as exc:
            if not is_conflict(exc):
                raise
            latest = dict(
                await self.client.get(self.resource, meta["name"], namespace=meta["namespace"])
            )
            if (latest.get("status") or {}) == self.status:
                self.obj = latest
                self.remember(latest)
                self.written = conditions.snapshot(self.status)
                return False
            latest["status"] = self.status
            updated = await self._replace_status(latest)
        before = (self.written.get("phase"), conditions.ready_reason(self.written))
        after = (self.status.get("phase"), conditions.ready_reason(self.status))
        self.obj = updated
        self.remember(updated)
        self.written = conditions.snapshot(self.status)
        if self.events is not None and after != before:
            await self.announce(*after)
        return True

    async def announce(self, phase: str | None, reason: str | None) -> None:
        if reason is None or reason in SILENT_REASONS:
            return
        type_ = "Warning" if phase in WARNING_PHASES or reason in WARNING_REASONS else "Normal"
        cond = conditions.find_condition(self.status, contract.CONDITION_READY) or {}
        assert self.events is not None
        await self.events.record(self.obj, type_, str(reason), cond.get("message", ""))
