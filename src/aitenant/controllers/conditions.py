"""Status and condition handling with Kubernetes ``meta.SetStatusCondition`` semantics.

``lastTransitionTime`` changes only when a condition's status flips; reason, message and
observedGeneration are overwritten. Phase and Ready always move together: Ready is True only
in phase Active.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from aitenant import contract
from aitenant.controllers import messages

Status = dict[str, Any]


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def find_condition(status: Status, type_: str) -> dict[str, Any] | None:
    for cond in status.get("conditions") or []:
        if cond.get("type") == type_:
            return cond
    return None


def set_condition(
    status: Status,
    *,
    type_: str,
    state: bool,
    reason: str,
    message: str,
    generation: int,
    now: str | None = None,
) -> None:
    value = "True" if state else "False"
    # Within the CRD's limit, or the whole status write is refused (messages.py).
    message = messages.bounded(message)
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    existing = find_condition(status, type_)
    if existing is None:
        conditions.append(
            {
                "type": type_,
                "status": value,
                "observedGeneration": generation,
                "lastTransitionTime": now or now_rfc3339(),
                "reason": reason,
                "message": message,
            }
        )
        return
    if existing.get("status") != value:
        existing["status"] = value
        existing["lastTransitionTime"] = now or now_rfc3339()
    existing["reason"] = reason
    existing["message"] = message
    existing["observedGeneration"] = generation


def remove_condition(status: Status, type_: str) -> None:
    conditions = status.get("conditions")
    if conditions:
        status["conditions"] = [c for c in conditions if c.get("type") != type_]
        if not status["conditions"]:
            del status["conditions"]


def set_phase(status: Status, phase: str, reason: str, message: str, generation: int) -> None:
    status["phase"] = phase
    set_condition(
        status,
        type_=contract.CONDITION_READY,
        state=phase == contract.PHASE_ACTIVE,
        reason=reason,
        message=message,
        generation=generation,
    )


def ready_reason(status: Status) -> str | None:
    cond = find_condition(status, contract.CONDITION_READY)
    return cond.get("reason") if cond else None


def is_ready(obj: dict[str, Any]) -> bool:
    """Ready=True observed at the object's current generation (MaasTenantConfig readiness)."""
    cond = find_condition(obj.get("status") or {}, contract.CONDITION_READY)
    generation = int(obj.get("metadata", {}).get("generation") or 0)
    return (
        cond is not None
        and cond.get("status") == "True"
        and int(cond.get("observedGeneration") or 0) == generation
    )


def snapshot(status: Status) -> Status:
    return copy.deepcopy(status)
