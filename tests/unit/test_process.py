"""The controller process's exit path."""

from __future__ import annotations

from aitenant.app.process import leaves


def test_a_failure_nested_in_task_groups_is_logged_as_itself() -> None:
    bind = OSError(98, "address already in use")
    other = ValueError("x")
    nested = ExceptionGroup("outer", [ExceptionGroup("inner", [bind]), other])
    assert leaves(nested) == [bind, other]
