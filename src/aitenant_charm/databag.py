"""Relation databags: write only what differs, so Juju sees no change when nothing does."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping


def update_databag(databag: MutableMapping[str, str], data: Mapping[str, str]) -> None:
    """Write the keys whose value differs (Juju sees no change when nothing does)."""
    for key, value in data.items():
        if databag.get(key) != value:
            databag[key] = value
