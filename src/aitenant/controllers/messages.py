"""Status text bounded where it is built, so every status can be written.

A condition message the CRD refuses (``maxLength``, ``contract.CONDITION_MESSAGE_MAX``) fails
the whole status write with 422, and the object keeps saying what it said before, ``Ready=True``
included, while nothing is reconciled. Values a tenant admin writes (annotations are up to
256 KiB) are quoted cut short, and every condition message is cut to the CRD's limit
(docs/contract.md §3.7).
"""

from __future__ import annotations

from typing import Final

from aitenant import contract

# Characters of a quoted value kept before the ellipsis: enough to recognise it.
QUOTED_MAX: Final = 64


def quoted(value: str, limit: int = QUOTED_MAX) -> str:
    """``"value"``; a longer value as its first ``limit`` characters, an ellipsis and its
    length: ``"aaaa…" (40000 characters)``."""
    if len(value) <= limit:
        return f'"{value}"'
    return f'"{value[:limit]}…" ({len(value)} characters)'


def bounded(message: str, limit: int = contract.CONDITION_MESSAGE_MAX) -> str:
    """``message`` within ``limit`` characters (the CRD counts characters, not bytes): cut,
    with an ellipsis and the full length at the end, when it is longer."""
    if len(message) <= limit:
        return message
    tail = f"… (cut from {len(message)} characters)"
    if limit <= len(tail):
        return message[:limit]
    return message[: limit - len(tail)] + tail
