"""Kubernetes condition semantics and MaasTenantConfig readiness."""

from __future__ import annotations

from aitenant.controllers import conditions


def test_transition_time_changes_only_when_status_flips() -> None:
    status: dict = {}
    conditions.set_phase(status, "Pending", "TenantConfigNotReady", "waiting", 1)
    first = conditions.find_condition(status, "Ready")
    assert first is not None
    first["lastTransitionTime"] = "2020-01-01T00:00:00Z"
    conditions.set_phase(status, "Failed", "GatewayCheckFailed", "no gateway", 2)
    cond = conditions.find_condition(status, "Ready")
    assert cond == {
        "type": "Ready",
        "status": "False",
        "observedGeneration": 2,
        "lastTransitionTime": "2020-01-01T00:00:00Z",
        "reason": "GatewayCheckFailed",
        "message": "no gateway",
    }
    assert status["phase"] == "Failed"
    conditions.set_phase(status, "Active", "Reconciled", "ok", 2)
    cond = conditions.find_condition(status, "Ready")
    assert cond is not None
    assert cond["status"] == "True"
    assert cond["lastTransitionTime"] != "2020-01-01T00:00:00Z"


def test_only_active_is_ready() -> None:
    for phase in ("Pending", "Failed", "Terminating"):
        status: dict = {}
        conditions.set_phase(status, phase, "R", "m", 1)
        assert conditions.find_condition(status, "Ready")["status"] == "False"  # type: ignore[index]


def test_remove_condition_drops_empty_list() -> None:
    status: dict = {}
    conditions.set_condition(
        status, type_="Degraded", state=True, reason="X", message="m", generation=1
    )
    conditions.remove_condition(status, "Degraded")
    assert status == {}


def test_config_ready_requires_matching_generation() -> None:
    def config(generation: int, observed: int, state: str = "True") -> dict:
        return {
            "metadata": {"generation": generation},
            "status": {
                "conditions": [{"type": "Ready", "status": state, "observedGeneration": observed}]
            },
        }

    assert conditions.is_ready(config(2, 2))
    assert not conditions.is_ready(config(3, 2))
    assert not conditions.is_ready(config(2, 2, "False"))
    assert not conditions.is_ready({"metadata": {"generation": 1}})
