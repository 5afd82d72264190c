"""The maas_api interface library: databag round trip, provider publishing, requirer events."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator

import ops
import pytest
from charm_kit import DEFAULT_MAAS_API
from ops import testing

from charms.aitenant_k8s.v0.maas_api import (
    LIBAPI,
    LIBID,
    DatabagError,
    MaasApiAppData,
    MaasApiProvider,
    MaasApiRequirer,
)

PROVIDER_META = """
name: maas-api-k8s
provides:
  maas-api:
    interface: maas_api
"""
REQUIRER_META = """
name: consumer
requires:
  maas-api:
    interface: maas_api
    limit: 1
"""


class ProviderCharm(ops.CharmBase):
    def __init__(self, framework: ops.Framework):
        super().__init__(framework)
        self.maas_api = MaasApiProvider(self)
        framework.observe(self.on["maas-api"].relation_joined, self._publish)

    def _publish(self, _: ops.EventBase) -> None:
        self.maas_api.publish(DEFAULT_MAAS_API)


class RequirerCharm(ops.CharmBase):
    def __init__(self, framework: ops.Framework):
        super().__init__(framework)
        self.maas_api = MaasApiRequirer(self)
        self.seen: list[str] = []
        framework.observe(self.maas_api.on.maas_api_changed, self._changed)
        framework.observe(self.maas_api.on.maas_api_broken, self._broken)

    def _changed(self, _: ops.EventBase) -> None:
        self.seen.append("changed")

    def _broken(self, _: ops.EventBase) -> None:
        self.seen.append("broken")


def _harness(charm_type: type[ops.CharmBase], meta: str) -> testing.Harness[ops.CharmBase]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return testing.Harness(charm_type, meta=meta)


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[testing.Harness[ops.CharmBase]]:
    monkeypatch.setenv("JUJU_VERSION", "3.6.4")
    h = _harness(ProviderCharm, PROVIDER_META)
    h.set_leader(True)
    h.begin()
    yield h
    h.cleanup()


@pytest.fixture
def requirer(monkeypatch: pytest.MonkeyPatch) -> Iterator[testing.Harness[ops.CharmBase]]:
    monkeypatch.setenv("JUJU_VERSION", "3.6.4")
    h = _harness(RequirerCharm, REQUIRER_META)
    h.begin()
    yield h
    h.cleanup()


def test_library_identity():
    # GIVEN the library module
    # WHEN we read its header
    # THEN it has a Charmhub-style id and API version 0
    assert len(LIBID) == 32
    assert LIBAPI == 0


def test_databag_round_trip():
    # GIVEN app data
    bag: dict[str, str] = {}
    # WHEN it is dumped and loaded
    DEFAULT_MAAS_API.dump(bag)
    # THEN each field is JSON under its own key and loads back equal
    assert bag["service_port"] == "8443"
    assert json.loads(bag["image"]) == DEFAULT_MAAS_API.image
    assert MaasApiAppData.load(bag) == DEFAULT_MAAS_API


@pytest.mark.parametrize(
    "bag",
    [
        {"image": "not json"},
        {"image": json.dumps("x")},  # infra_namespace missing
        {"image": json.dumps("x"), "infra_namespace": json.dumps("Bad_NS")},
        # Not an image reference: nothing but a reference reaches a Deployment's image.
        {"image": json.dumps("two words"), "infra_namespace": json.dumps("ns")},
        {"image": json.dumps("--flag=x"), "infra_namespace": json.dumps("ns")},
        {"image": json.dumps("x"), "infra_namespace": json.dumps("ns"), "db_secret": '"a/b"'},
    ],
)
def test_invalid_databag_raises(bag: dict[str, str]):
    # GIVEN a malformed bag
    # WHEN it is loaded
    # THEN a DatabagError explains it
    with pytest.raises(DatabagError):
        MaasApiAppData.load(bag)


def test_provider_publishes_on_join(provider: testing.Harness[ops.CharmBase]):
    # GIVEN a provider leader
    relation_id = provider.add_relation("maas-api", "aitenant-k8s")
    # WHEN a consumer unit joins
    provider.add_relation_unit(relation_id, "aitenant-k8s/0")
    # THEN the provider's app bag holds the data
    bag = provider.get_relation_data(relation_id, "maas-api-k8s")
    assert MaasApiAppData.load(bag) == DEFAULT_MAAS_API


def test_provider_non_leader_does_not_write(provider: testing.Harness[ops.CharmBase]):
    # GIVEN a provider unit that is not the leader
    provider.set_leader(False)
    relation_id = provider.add_relation("maas-api", "aitenant-k8s")
    # WHEN a consumer joins
    provider.add_relation_unit(relation_id, "aitenant-k8s/0")
    # THEN nothing is written
    assert provider.get_relation_data(relation_id, "maas-api-k8s") == {}


def test_requirer_reads_data_and_emits_events(requirer: testing.Harness[ops.CharmBase]):
    # GIVEN a requirer with no relation
    charm = requirer.charm
    assert isinstance(charm, RequirerCharm)
    assert charm.maas_api.get_data() is None
    assert not charm.maas_api.is_related
    # WHEN the provider publishes, then the relation is removed
    bag: dict[str, str] = {}
    DEFAULT_MAAS_API.dump(bag)
    relation_id = requirer.add_relation("maas-api", "maas-api-k8s", app_data=bag)
    data = charm.maas_api.get_data()
    requirer.remove_relation(relation_id)
    # THEN the data was readable while related, and both events fired
    assert data == DEFAULT_MAAS_API
    assert charm.seen[-1] == "broken"
    assert "changed" in charm.seen
    assert charm.maas_api.get_data() is None
