"""Fixtures for the charm's Harness tests: a patched lightkube Client and a begun Harness."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from unittest.mock import MagicMock, patch

import pytest
from charm_kit import APP, MODEL, SERVER_VERSION, CharmKit, api_error, set_tenant_count
from ops import testing

import charm
from charm import AITenantCharm


@pytest.fixture
def kube() -> Iterator[MagicMock]:
    """The lightkube Client the charm constructs: a trusted, empty cluster by default.

    ``_client`` is lightkube's request layer, which the charm uses for the single-item list
    that counts tenants; ``set_tenant_count`` arranges its answer.
    """
    with patch.object(charm, "Client", autospec=True) as client_class:
        client = client_class.return_value
        client.list.side_effect = lambda *args, **kwargs: iter([])  # pyright: ignore[reportUnknownLambdaType]
        client.apply.side_effect = lambda obj, *args, **kwargs: obj  # pyright: ignore[reportUnknownLambdaType]
        client.get.side_effect = api_error(404, "not found")
        # GET /version through lightkube's own HTTP client (it has no call for it).
        http = MagicMock()
        http.get.return_value.json.return_value = dict(SERVER_VERSION)
        client._client = MagicMock(_client=http)
        set_tenant_count(client, items=0, remaining=None)
        yield client


@pytest.fixture(autouse=True)
def served() -> Iterator[MagicMock]:
    """What the unit's webhook port serves: nothing by default (no workload in unit tests)."""
    with patch.object(charm, "served_certificate", return_value=None) as probe:
        yield probe


@pytest.fixture
def harness(
    kube: MagicMock, monkeypatch: pytest.MonkeyPatch
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
    h.set_can_connect(charm.CONTAINER, True)
    h.begin()
    assert h.model.app.name == APP
    yield h
    h.cleanup()


@pytest.fixture
def kit(harness: testing.Harness[AITenantCharm], kube: MagicMock) -> CharmKit:
    return CharmKit(harness, kube)


@pytest.fixture
def ready(kit: CharmKit) -> CharmKit:
    """A healthy leader: gateway and maas-api related, container up, service planned."""
    kit.make_ready()
    return kit
