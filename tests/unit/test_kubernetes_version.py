"""The supported Kubernetes range and the one-line refusal of an older API server."""

from __future__ import annotations

import pytest

from aitenant import kubernetes_version
from aitenant.app.process import UnsupportedServer, check_server_version

from .scripted_api import ScriptedApi, ok


@pytest.mark.parametrize(
    ("info", "version"),
    [({"major": "1", "minor": "32"}, (1, 32)), ({"major": "1", "minor": "37+"}, (1, 37))],
)
def test_server_version(info: dict[str, str], version: tuple[int, int]) -> None:
    assert kubernetes_version.parse_server_version(info) == version


def test_server_version_without_numbers_is_an_error() -> None:
    with pytest.raises(ValueError, match="minor"):
        kubernetes_version.parse_server_version({"major": "1", "minor": ""})


@pytest.mark.parametrize("minor", ["32", "37", "40"])
def test_supported_servers_pass(minor: str) -> None:
    assert kubernetes_version.unsupported_reason({"major": "1", "minor": minor}) is None


def test_an_older_server_is_named_with_the_version_needed() -> None:
    info = {"major": "1", "minor": "31", "gitVersion": "v1.31.4"}
    assert kubernetes_version.unsupported_reason(info) == (
        "the API server runs Kubernetes v1.31.4; aitenant-k8s needs 1.32 or later"
    )
    # Without a gitVersion the parsed numbers stand in for it.
    assert "Kubernetes v1.20;" in (
        kubernetes_version.unsupported_reason({"major": "1", "minor": "20+"}) or ""
    )


async def test_the_controller_refuses_an_older_api_server_before_any_write() -> None:
    api = ScriptedApi().on(
        "GET", "/version", ok({"major": "1", "minor": "31", "gitVersion": "v1.31.2"})
    )
    with pytest.raises(UnsupportedServer) as info:
        await check_server_version(api.client())
    assert str(info.value) == (
        "the API server runs Kubernetes v1.31.2; aitenant-k8s needs 1.32 or later"
    )
    assert api.writes == []


async def test_the_controller_starts_on_a_supported_api_server() -> None:
    api = ScriptedApi().on("GET", "/version", ok({"major": "1", "minor": "37"}))
    await check_server_version(api.client())
