# Copyright 2025 aitenant-k8s contributors
# SPDX-License-Identifier: Apache-2.0

"""The ``maas_api`` interface: the MaaS API charm tells the AITenant controller how to run maas-api.

The AITenant controller renders one maas-api platform per tenant (Deployment, Service, route,
policies). It needs a few facts that only the MaaS API charm knows, and this interface carries
them in the provider's **application** databag:

=================== ===================================================================
key                 meaning
=================== ===================================================================
``image``           maas-api OCI image the tenant Deployments run
``infra_namespace`` namespace where maas-api runs (the controller's infra namespace)
``service_name``    name of the default tenant's maas-api Service (``maas-api``)
``service_port``    HTTPS port of every maas-api Service (8443)
``db_secret``       Kubernetes Secret in the infra namespace holding ``DB_CONNECTION_URL``
=================== ===================================================================

Each value is stored JSON-encoded under its own key, so a human reading
``juju show-unit`` sees plain fields. Only the leader writes; the requirer reads the remote
application's bag and validates it with :class:`MaasApiAppData`.

Provider (the MaaS API charm)::

    from charms.aitenant_k8s.v0.maas_api import MaasApiAppData, MaasApiProvider

    class MaasApiCharm(ops.CharmBase):
        def __init__(self, framework):
            super().__init__(framework)
            self.maas_api = MaasApiProvider(self)
            framework.observe(self.on["maas-api"].relation_joined, self._reconcile)

        def _reconcile(self, _):
            self.maas_api.publish(MaasApiAppData(
                image="quay.io/opendatahub/maas-api:v0.1",
                infra_namespace=self.model.name,
                service_name="maas-api",
                service_port=8443,
                db_secret="maas-db-config",
            ))

Requirer (the AITenant charm)::

    from charms.aitenant_k8s.v0.maas_api import MaasApiRequirer

    class AITenantCharm(ops.CharmBase):
        def __init__(self, framework):
            super().__init__(framework)
            self.maas_api = MaasApiRequirer(self)
            framework.observe(self.maas_api.on.maas_api_changed, self._reconcile)
            framework.observe(self.maas_api.on.maas_api_broken, self._reconcile)

        def _reconcile(self, _):
            data = self.maas_api.get_data()   # None until the provider has published
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, MutableMapping

import ops
from pydantic import BaseModel, ConfigDict, Field, ValidationError

# The unique Charmhub library identifier, never change it
LIBID = "79bc98c4c67b45179b9d2f5fe220e10d"

# Increment this major API version when introducing breaking changes
LIBAPI = 0

# Increment this PATCH version before using `charmcraft publish-lib` or reset
# to 0 if you are raising the major API version
LIBPATCH = 2

PYDEPS = ["pydantic>=2"]

DEFAULT_RELATION_NAME = "maas-api"
INTERFACE_NAME = "maas_api"

logger = logging.getLogger(__name__)

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# An OCI image reference: [registry[:port]/]path[:tag][@digest], the grammar of the
# distribution project's reference package, so no other text reaches a Deployment's image.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = (
    r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
    r"(?::[0-9]+)?/)?"
    rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[a-f0-9]{64})?$"
)


class DatabagError(ValueError):
    """The remote application's databag is present but does not hold valid data."""


class MaasApiAppData(BaseModel):
    """What the provider publishes in its application databag."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    image: str = Field(
        min_length=1, max_length=4096, pattern=_IMAGE, description="maas-api OCI image reference"
    )
    infra_namespace: str = Field(
        min_length=1, max_length=63, pattern=_DNS_LABEL, description="namespace of maas-api"
    )
    service_name: str = Field(default="maas-api", min_length=1, max_length=63, pattern=_DNS_LABEL)
    service_port: int = Field(default=8443, ge=1, le=65535)
    db_secret: str = Field(
        default="maas-db-config",
        min_length=1,
        max_length=253,
        pattern=_DNS_SUBDOMAIN,
        description="DB Secret name",
    )

    def dump(self, databag: MutableMapping[str, str]) -> None:
        """Write every field, JSON-encoded, under its own key."""
        for key, value in self.model_dump(mode="json").items():
            databag[key] = json.dumps(value)

    @classmethod
    def load(cls, databag: Mapping[str, str]) -> MaasApiAppData:
        """Read the fields back; raise :class:`DatabagError` when they are not valid."""
        try:
            raw = {key: json.loads(databag[key]) for key in cls.model_fields if key in databag}
        except json.JSONDecodeError as exc:
            raise DatabagError(f"maas_api databag is not JSON-encoded: {exc}") from None
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "databag"
            raise DatabagError(f"maas_api databag field {field!r}: {first['msg']}") from None


class MaasApiChangedEvent(ops.RelationEvent):
    """The provider published (or changed) its data; read it with ``get_data()``."""


class MaasApiBrokenEvent(ops.RelationEvent):
    """The relation is going away; the data is no longer valid."""


class MaasApiRequirerEvents(ops.ObjectEvents):
    """Events emitted by :class:`MaasApiRequirer`."""

    maas_api_changed = ops.EventSource(MaasApiChangedEvent)
    maas_api_broken = ops.EventSource(MaasApiBrokenEvent)


class MaasApiProvider(ops.Object):
    """Provider side: publish :class:`MaasApiAppData` to every related application."""

    def __init__(self, charm: ops.CharmBase, relation_name: str = DEFAULT_RELATION_NAME):
        super().__init__(charm, relation_name)
        self._charm = charm
        self._relation_name = relation_name

    def publish(self, data: MaasApiAppData) -> None:
        """Write ``data`` into the application databag of every relation (leader only)."""
        if not self._charm.unit.is_leader():
            logger.debug("not the leader: maas_api data is published by the leader")
            return
        for relation in self._charm.model.relations[self._relation_name]:
            data.dump(relation.data[self._charm.app])


class MaasApiRequirer(ops.Object):
    """Requirer side: read and validate the provider's data, re-emit relation events."""

    on = MaasApiRequirerEvents()  # pyright: ignore[reportAssignmentType]

    def __init__(self, charm: ops.CharmBase, relation_name: str = DEFAULT_RELATION_NAME):
        super().__init__(charm, relation_name)
        self._charm = charm
        self._relation_name = relation_name
        events = charm.on[relation_name]
        self.framework.observe(events.relation_changed, self._on_relation_changed)
        self.framework.observe(events.relation_broken, self._on_relation_broken)

    @property
    def relation(self) -> ops.Relation | None:
        """The relation, or None when the charm is not integrated (limit 1)."""
        return self._charm.model.get_relation(self._relation_name)

    @property
    def is_related(self) -> bool:
        """True when the relation exists (whether or not data has arrived)."""
        return self.relation is not None

    def get_data(self) -> MaasApiAppData | None:
        """The provider's data, or None when the relation or the data is missing or invalid."""
        try:
            return self.read()
        except DatabagError as exc:
            logger.warning("ignoring maas_api data: %s", exc)
            return None

    def read(self) -> MaasApiAppData | None:
        """Like :meth:`get_data`, but raise :class:`DatabagError` for invalid data."""
        relation = self.relation
        if relation is None or relation.app is None:
            return None
        databag = relation.data[relation.app]
        if not databag:
            return None
        return MaasApiAppData.load(databag)

    def _on_relation_changed(self, event: ops.RelationChangedEvent) -> None:
        self.on.maas_api_changed.emit(event.relation, app=event.app, unit=event.unit)

    def _on_relation_broken(self, event: ops.RelationBrokenEvent) -> None:
        self.on.maas_api_broken.emit(event.relation, app=event.app, unit=event.unit)
