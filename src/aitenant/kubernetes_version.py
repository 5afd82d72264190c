"""The Kubernetes versions we support, and the check the controller and the charm make at start.

MaaS needs OpenShift 4.19.9 or later, that is Kubernetes 1.32; the end-to-end suite runs on
1.37 by default and on 1.32 on request (README, "Supported Kubernetes"). Dependency-free: the
charm imports it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

OLDEST_SUPPORTED: Final = (1, 32)
NEWEST_TESTED: Final = (1, 37)


def parse_server_version(info: Mapping[str, Any]) -> tuple[int, int]:
    """(major, minor) from the API server's ``/version`` answer (``"32+"`` reads as 32)."""
    numbers: list[int] = []
    for key in ("major", "minor"):
        match = re.match(r"\d+", str(info.get(key) or ""))
        if match is None:
            raise ValueError(f"API server /version has no numeric {key}: {dict(info)!r}")
        numbers.append(int(match.group()))
    return numbers[0], numbers[1]


def unsupported_reason(info: Mapping[str, Any]) -> str | None:
    """One line naming the version found and the version needed, or None when supported."""
    version = parse_server_version(info)
    if version >= OLDEST_SUPPORTED:
        return None
    found = info.get("gitVersion") or f"v{version[0]}.{version[1]}"
    oldest = ".".join(map(str, OLDEST_SUPPORTED))
    return f"the API server runs Kubernetes {found}; aitenant-k8s needs {oldest} or later"
