"""Status text bounded where it is built (``messages.py``): quoted values cut short, every
condition message within its CRD's maxLength, so the status write is never refused."""

from __future__ import annotations

from typing import Any

import pytest

from aitenant import contract, manifests
from aitenant.controllers import conditions
from aitenant.controllers.messages import QUOTED_MAX, bounded, quoted


def test_a_short_value_is_quoted_whole() -> None:
    assert quoted("3") == '"3"'
    assert quoted("x" * QUOTED_MAX) == '"' + "x" * QUOTED_MAX + '"'


def test_a_long_value_is_cut_with_an_ellipsis_and_its_length() -> None:
    value = "ab" * 20_000
    assert quoted(value) == f'"{value[:QUOTED_MAX]}…" (40000 characters)'
    assert quoted("é" * 70, limit=4) == '"éééé…" (70 characters)'


@pytest.mark.parametrize("length", [0, 1, 32_767, 32_768])
def test_a_message_within_the_limit_is_kept(length: int) -> None:
    message = "m" * length
    assert bounded(message) == message


@pytest.mark.parametrize("length", [32_769, 40_000, 300_000])
def test_a_longer_message_is_cut_to_the_limit_and_says_so(length: int) -> None:
    message = "m" * length
    cut = bounded(message)
    assert len(cut) == contract.CONDITION_MESSAGE_MAX
    assert cut.endswith(f"… (cut from {length} characters)")
    assert message.startswith(cut.split("…")[0])


def test_characters_not_bytes_are_counted() -> None:
    # The API server counts a string's characters against maxLength.
    message = "é" * 32_768
    assert bounded(message) == message
    assert len(bounded("é" * 32_769)) == 32_768


def test_a_tiny_limit_still_holds() -> None:
    assert bounded("m" * 50, limit=10) == "m" * 10


def test_every_condition_message_is_bounded_where_it_is_set() -> None:
    status: dict[str, Any] = {}
    conditions.set_phase(status, "Failed", "InvalidTenantConfig", "x" * 40_000, 1)
    cond = conditions.find_condition(status, "Ready")
    assert cond is not None
    assert len(cond["message"]) == contract.CONDITION_MESSAGE_MAX
    # A message that already holds the limit gains a prefix elsewhere (the AITenant quotes
    # its config's): still bounded.
    conditions.set_phase(status, "Pending", "TenantConfigNotReady", "p: " + cond["message"], 2)
    again = conditions.find_condition(status, "Ready")
    assert again is not None
    assert len(again["message"]) == contract.CONDITION_MESSAGE_MAX


def message_limits(node: Any) -> list[int]:
    """maxLength of every ``conditions[].message`` in a CRD's schema."""
    found: list[int] = []
    if isinstance(node, dict):
        conds = (node.get("properties") or {}).get("conditions")
        if isinstance(conds, dict):
            message = conds.get("items", {}).get("properties", {}).get("message", {})
            found.append(message.get("maxLength", -1))
        for value in node.values():
            found.extend(message_limits(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(message_limits(value))
    return found


def test_the_limit_is_every_crds_condition_message_max_length() -> None:
    limits = {
        doc["metadata"]["name"]: message_limits(doc["spec"]) for doc in manifests.crd_documents()
    }
    assert any(limits.values())
    for name, found in limits.items():
        assert all(limit >= contract.CONDITION_MESSAGE_MAX for limit in found), (name, found)
    assert contract.CONDITION_MESSAGE_MAX in {n for found in limits.values() for n in found}
