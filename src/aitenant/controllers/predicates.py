"""Event predicates both controllers use; each controller's ``setup.py`` holds its own."""

from __future__ import annotations

from aitenant.controllers import conditions
from aitenant.resources import Obj
from aitenant.runtime.cache.informer import EventType


def status_overwritten(event: EventType, old: Obj | None, new: Obj, *, ours: bool) -> bool:
    """AITenant and config predicate: someone else changed the status (``ours``: the informer
    knows this version for one of our own writes). The status is entirely ours, so the object
    is reconciled at once and the status put right; our own status writes bring nothing back."""
    if event != "MODIFIED" or old is None or ours:
        return False
    return (old.get("status") or {}) != (new.get("status") or {})


def can_wait(event: EventType, obj: Obj) -> bool:
    """Whether an added AITenant or config waits behind the keys with work under way (the
    work queue's low priority; alone in the queue it goes at once):

    * settled: seen in a (re)list already Ready at its generation, probably nothing to do;
    * new: never reconciled (no status yet). Under a flood of creates, the tenants already
      begun are finished before more are begun, so each is Ready in about the time of its own
      work instead of after every create's first step (docs/design.md §2.3)."""
    if event != "ADDED" or obj["metadata"].get("deletionTimestamp"):
        return False
    return not obj.get("status") or conditions.is_ready(obj)
