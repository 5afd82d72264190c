"""Fixtures for the charm's Harness tests: a patched lightkube Client and a begun Harness."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from unittest.mock import MagicMock, patch

import pytest
from charm_kit import APP, MODEL, SERVER_VERSION, CharmKit, PrivateCalls, api_error
from ops import testing

import charm
from aitenant_charm import lightkube_private, pebble_layer, webhook_trust
from aitenant_charm.workload import CONTAINER
from charm import AITenantCharm


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
def harness(
    kube: MagicMock, private: PrivateCalls, monkeypatch: pytest.MonkeyPatch
) -> Iterator[testing.Harness[AITenantCharm]]:
    """A begun Harness: leader unit 0 of `aitenant-k8s` in model `maas`, container reachable.

    No event has run yet; use ``kit.reconcile()`` or emit one.
    """
    monkeypatch.setenv("JUJU_VERSION", "3.6.4")  # metadata.yaml assumes juju >= 3.6
    with warnings.catch_warnings():
        # Harness is the design's choice (docs/design.md §8); ops marks it pending deprecation.
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        h = testing.Harness(AITenantCharm)
    h.set_model_name(MODEL)
    h.set_leader(True)
    h.set_can_connect(CONTAINER, True)
    h.begin()
    assert h.model.app.name == APP
    yield h
    h.cleanup()


@pytest.fixture
def kit(
    harness: testing.Harness[AITenantCharm], kube: MagicMock, private: PrivateCalls
) -> CharmKit:
    return CharmKit(harness, kube, private)


@pytest.fixture
def ready(kit: CharmKit) -> CharmKit:
    """A healthy leader: gateway and maas-api related, container up, service planned."""
    kit.make_ready()
    return kit
