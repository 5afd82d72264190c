"""lightkube's private API as the charm uses it, checked against the locked release.

When the first test fails, lightkube was upgraded in uv.lock: re-check every function of
``aitenant_charm.lightkube_private`` against the new release, then update ``VERIFIED_VERSION``.
The other tests exercise each function at the transport, with lightkube's synchronous client.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import httpx2
import pytest
from lightkube import ApiError
from tests.unit.scripted_api import ScriptedApi, ok, status

from aitenant_charm import lightkube_private as private
from aitenant_charm.cluster_manifests import AITENANT

ROOT = Path(__file__).parents[3]
AITENANTS = "/apis/maas.opendatahub.io/v1alpha1/aitenants"


def test_the_locked_and_installed_lightkube_is_the_verified_one() -> None:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    locked = next(p["version"] for p in lock["package"] if p["name"] == "lightkube")
    assert locked == private.VERIFIED_VERSION
    assert metadata.version("lightkube") == private.VERIFIED_VERSION


def test_api_version_reads_the_version_document() -> None:
    api = ScriptedApi().on("GET", "/version", ok({"major": "1", "minor": "20+"}))
    assert private.api_version(api.sync_client()) == {"major": "1", "minor": "20+"}
    assert api.requests() == [("GET", "/version")]


def test_api_version_raises_on_an_error_status() -> None:
    api = ScriptedApi().on("GET", "/version", status(403, "Forbidden"))
    with pytest.raises(httpx2.HTTPStatusError):
        private.api_version(api.sync_client())


@pytest.mark.parametrize(
    ("metadata_", "items", "expected"),
    [({"remainingItemCount": 1499, "continue": "c"}, 1, 1500), ({}, 1, 1), ({}, 0, 0)],
)
def test_count_objects_asks_for_one_item_and_adds_the_remaining_count(
    metadata_: dict[str, object], items: int, expected: int
) -> None:
    body = {
        "kind": "AITenantList",
        "metadata": metadata_,
        "items": [{"metadata": {"name": f"t{i}"}} for i in range(items)],
    }
    api = ScriptedApi().on("GET", AITENANTS, ok(body))
    assert private.count_objects(api.sync_client(), AITENANT) == expected
    (sent,) = api.sent
    assert (sent.verb, sent.path, sent.params) == ("GET", AITENANTS, {"limit": "1"})


def test_count_objects_maps_errors_to_api_error() -> None:
    api = ScriptedApi().on("GET", AITENANTS, status(403, "Forbidden", "no list"))
    with pytest.raises(ApiError) as info:
        private.count_objects(api.sync_client(), AITENANT)
    assert info.value.status.code == 403


def test_close_closes_the_connections() -> None:
    api = ScriptedApi().on("GET", "/version", ok({"major": "1", "minor": "20"}))
    client = api.sync_client()
    private.api_version(client)
    private.close(client)
    with pytest.raises(RuntimeError, match="closed"):
        private.api_version(client)


def test_no_other_charm_module_reaches_into_lightkube_privates() -> None:
    pattern = re.compile(r"(?<!self)\._client\b|\._api_info\b|\._transport\b")
    package = ROOT / "src" / "aitenant_charm"
    modules = [ROOT / "src" / "charm.py", *package.rglob("*.py")]
    modules.remove(package / "lightkube_private.py")  # the one module allowed to
    assert package / "api_server_reads.py" in modules  # the glob really found the package
    assert [str(p.name) for p in modules if pattern.search(p.read_text())] == []
