"""The maas_api interface library: databag round trip, provider publishing, requirer events."""

from __future__ import annotations

import json

import ops
import pytest
import yaml
from ops import testing
from tests.juju.kit import DEFAULT_MAAS_API

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


def _context(charm_type: type[ops.CharmBase], meta: str) -> testing.Context[ops.CharmBase]:
    return testing.Context(charm_type, meta=yaml.safe_load(meta))


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


def _provider_joined(leader: bool) -> dict[str, str]:
    """The provider's app databag after a consumer unit joined."""
    ctx = _context(ProviderCharm, PROVIDER_META)
    relation = testing.Relation("maas-api", remote_app_name="aitenant-k8s")
    state = testing.State(leader=leader, relations={relation})
    out = ctx.run(ctx.on.relation_joined(relation, remote_unit=0), state)
    return dict(out.get_relation(relation.id).local_app_data)


def test_provider_publishes_on_join():
    # GIVEN a provider leader
    # WHEN a consumer unit joins
    bag = _provider_joined(leader=True)
    # THEN the provider's app bag holds the data
    assert MaasApiAppData.load(bag) == DEFAULT_MAAS_API


def test_provider_non_leader_does_not_write():
    # GIVEN a provider unit that is not the leader
    # WHEN a consumer joins
    bag = _provider_joined(leader=False)
    # THEN nothing is written
    assert bag == {}


def test_requirer_reads_data_and_emits_events():
    ctx = _context(RequirerCharm, REQUIRER_META)
    # GIVEN a requirer with no relation
    with ctx(ctx.on.update_status(), testing.State()) as manager:
        charm = manager.charm
        assert isinstance(charm, RequirerCharm)
        assert charm.maas_api.get_data() is None
        assert not charm.maas_api.is_related
    # WHEN the provider publishes, then the relation is removed
    bag: dict[str, str] = {}
    DEFAULT_MAAS_API.dump(bag)
    relation = testing.Relation("maas-api", remote_app_name="maas-api-k8s", remote_app_data=bag)
    state = testing.State(relations={relation})
    with ctx(ctx.on.relation_changed(relation, remote_unit=0), state) as manager:
        state = manager.run()
        changed = manager.charm
        assert isinstance(changed, RequirerCharm)
        data = changed.maas_api.get_data()
    with ctx(ctx.on.relation_broken(state.get_relation(relation.id)), state) as manager:
        manager.run()
        broken = manager.charm
        assert isinstance(broken, RequirerCharm)
        after = broken.maas_api.get_data()
    # THEN the data was readable while related, and both events fired
    assert data == DEFAULT_MAAS_API
    assert broken.seen[-1] == "broken"
    assert "changed" in changed.seen
    assert after is None
