"""Whether an apply is needed at all: the live copy already holds what we render."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def covers(live: Any, desired: Any) -> bool:
    """True when ``live`` already holds every value of ``desired``.

    Maps: every desired key is present with a covering value (extra live keys, such as
    server-side defaults, are fine). Lists of named maps (containers, env, ports, volumes) are
    matched by name; other lists element by element with the same length. Scalars compare
    equal. This is what a server-side apply of ``desired`` would leave unchanged.
    """
    if isinstance(desired, Mapping):
        return isinstance(live, Mapping) and all(
            k in live and covers(live[k], v) for k, v in desired.items()
        )
    if isinstance(desired, list):
        if not isinstance(live, list):
            return False
        if desired and all(isinstance(d, Mapping) and "name" in d for d in desired):
            by_name = {item.get("name"): item for item in live if isinstance(item, Mapping)}
            return all(d["name"] in by_name and covers(by_name[d["name"]], d) for d in desired)
        return len(live) == len(desired) and all(
            covers(lv, dv) for lv, dv in zip(live, desired, strict=True)
        )
    return live == desired
