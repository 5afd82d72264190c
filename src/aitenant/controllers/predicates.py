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


def settled(event: EventType, obj: Obj) -> bool:
    """Seen in a (re)list already Ready at its generation: probably nothing to do, so it
    waits behind the objects that have work (the work queue's low priority)."""
    return (
        event == "ADDED"
        and not obj["metadata"].get("deletionTimestamp")
        and conditions.is_ready(obj)
    )
