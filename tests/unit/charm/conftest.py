"""Fixtures for the charm's tests: a patched lightkube Client and one unit under ops.testing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from unittest.mock import MagicMock, patch

import pytest
from tests.juju.kit import SERVER_VERSION, CharmKit, PrivateCalls, api_error

import charm
from aitenant_charm import lightkube_private, pebble_layer, webhook_trust


@pytest.fixture
def kube() -> Iterator[MagicMock]:
    """The lightkube Client the charm constructs: a trusted, empty cluster by default."""
    with patch.object(charm, "Client", autospec=True) as client_class:
        client = client_class.return_value
        client.list.side_effect = lambda *args, **kwargs: iter([])  # pyright: ignore[reportUnknownLambdaType]
        client.apply.side_effect = lambda obj, *args, **kwargs: obj  # pyright: ignore[reportUnknownLambdaType]
        client.get.side_effect = api_error(404, "not found")
        yield client


@pytest.fixture
def private() -> Iterator[PrivateCalls]:
    """What the charm asks through lightkube's private API (``lightkube_private``, tested at the
    transport in test_charm_lightkube.py): a 1.37 API server with no AITenant by default."""
    with (
        patch.object(lightkube_private, "api_version", autospec=True) as version,
        patch.object(lightkube_private, "count_objects", autospec=True) as count,
    ):
        version.return_value = dict(SERVER_VERSION)
        count.return_value = 0
        yield PrivateCalls(version=version, count=count)


@pytest.fixture(autouse=True)
def served() -> Iterator[MagicMock]:
    """What the unit's webhook port serves: nothing by default (no workload in unit tests)."""
    with patch.object(webhook_trust, "served_certificate", return_value=None) as probe:
        yield probe


@pytest.fixture(autouse=True)
def no_webhook_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-hook wait for the workload to serve new certificate files ends at once (no
    workload here); the CA overlap tests set their own."""
    monkeypatch.setattr(webhook_trust, "WEBHOOK_SETTLE_SECONDS", 0.0)


@pytest.fixture(autouse=True)
def readyz() -> Iterator[MagicMock]:
    """Whether the controller answers /readyz to the charm's probe: yes by default."""
    with patch.object(pebble_layer, "controller_ready", return_value=True) as probe:
        yield probe


@pytest.fixture
def kit(kube: MagicMock, private: PrivateCalls, tmp_path: Path) -> CharmKit:
    """Leader unit 0 of `aitenant-k8s` in model `maas`, container reachable; no hook has run
    yet (use ``kit.reconcile()`` or another verb)."""
    return CharmKit(kube, private, files=tmp_path / "workload")


@pytest.fixture
def ready(kit: CharmKit) -> CharmKit:
    """A healthy leader: gateway and maas-api related, container up, service planned."""
    kit.make_ready()
    return kit
