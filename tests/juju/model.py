"""The charm as Juju runs it, for ``ops.testing``: a fresh charm per hook, one shared cluster.

Each hook of each unit is one ``Context.run``: a new charm instance built from the unit's
last output state, the deployment's shared relation data and secrets, and the cluster. What
Juju shares between units (application databags, peers' unit databags, application secrets)
lives in :class:`Deployment` and is handed to every unit's next hook; what belongs to a unit
(its container, stored state, status) stays in that unit's state.

The cluster is :class:`FakeCluster`, the one thing faked at the charm's API boundary: it
stands in for the lightkube ``Client`` the charm constructs, keeps every object applied
(with a creation time, so "the oldest binding wins" means something) and is shared by every
unit and every deployment of a test. Each unit's workload is a :class:`Workload`: whether its
controller answers /readyz and which certificate its webhook port serves.

The end-to-end tests use the same class with neither: ``cluster=None`` leaves the charm's
lightkube client and probes real (``KUBECONFIG`` names the API server), and ``pebble`` binds
each unit's container to a real Pebble's socket instead of ops.testing's simulated one.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime
import itertools
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast
from unittest.mock import patch

import ops
from ops import testing

import charm
from aitenant_charm import lightkube_private, pebble_layer, webhook_trust
from aitenant_charm.workload import CONTAINER, WEBHOOK_CERT_DIR
from charm import AITenantCharm
from tests.juju.kit import (
    APP,
    DEFAULT_MAAS_API,
    META,
    ROOT,
    SERVER_VERSION,
    api_error,
    gateway_databag,
    maas_api_databag,
    new_container,
    new_context,
)

LOKI_URL = "http://loki-0.loki-endpoints.cos.svc.cluster.local:3100/loki/api/v1/push"


def _key(res: Any, namespace: str | None, name: str) -> tuple[Any, str | None, str]:
    return (res, namespace, name)


class FakeCluster:
    """An API server's objects, shared by every charm that talks to it in a test."""

    def __init__(self) -> None:
        self.objects: dict[tuple[Any, str | None, str], Any] = {}
        self.version: dict[str, str] = dict(SERVER_VERSION)
        # Models whose app has no `juju trust` (every call answers 403).
        self.untrusted: set[str] = set()
        # Raised by every apply while set (a throttling or failing API server).
        self.apply_error: Exception | None = None
        self.writes: list[tuple[str, str, str]] = []
        self._clock = itertools.count(1)

    def client(self, model: str) -> FakeClient:
        return FakeClient(self, model)

    def of_kind(self, res: Any) -> list[Any]:
        return [obj for (kind, _, _), obj in self.objects.items() if kind is res]

    def get(self, res: Any, name: str, namespace: str | None = None) -> Any:
        return self.objects[_key(res, namespace, name)]


class FakeClient:
    """The lightkube ``Client`` calls the charm makes, answered from :class:`FakeCluster`."""

    def __init__(self, cluster: FakeCluster, model: str) -> None:
        self.cluster = cluster
        self.model = model

    def _check(self) -> None:
        if self.model in self.cluster.untrusted:
            raise api_error(403, "forbidden")

    def list(
        self,
        res: Any,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        chunk_size: int | None = None,
    ) -> Iterator[Any]:
        self._check()
        found = []
        for (kind, ns, _), obj in self.cluster.objects.items():
            if kind is not res or (namespace not in (None, "*") and ns != namespace):
                continue
            have = (obj.metadata.labels or {}) if obj.metadata else {}
            if all(have.get(k) == v for k, v in (labels or {}).items()):
                found.append(copy.deepcopy(obj))
        return iter(found)

    def get(self, res: Any, name: str, namespace: str | None = None) -> Any:
        self._check()
        try:
            return copy.deepcopy(self.cluster.objects[_key(res, namespace, name)])
        except KeyError:
            raise api_error(404, f"{name} not found") from None

    def apply(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        self._check()
        if self.cluster.apply_error is not None:
            raise self.cluster.apply_error
        meta = obj.metadata
        key = _key(type(obj), meta.namespace, meta.name)
        stored = copy.deepcopy(obj)
        previous = self.cluster.objects.get(key)
        created = previous.metadata.creationTimestamp if previous is not None else None
        if created is None:
            epoch = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
            created = epoch + datetime.timedelta(seconds=next(self.cluster._clock))  # pyright: ignore[reportPrivateUsage]
        stored.metadata.creationTimestamp = created
        self.cluster.objects[key] = stored
        self.cluster.writes.append(("apply", type(obj).__name__, meta.name))
        return copy.deepcopy(stored)

    def create(self, obj: Any) -> Any:
        self._check()
        meta = obj.metadata
        key = _key(type(obj), meta.namespace, meta.name)
        if key in self.cluster.objects:
            raise api_error(409, f"{meta.name} already exists")
        self.cluster.objects[key] = copy.deepcopy(obj)
        self.cluster.writes.append(("create", type(obj).__name__, meta.name))
        return copy.deepcopy(obj)

    def delete(self, res: Any, name: str, namespace: str | None = None) -> None:
        self._check()
        if self.cluster.objects.pop(_key(res, namespace, name), None) is None:
            raise api_error(404, f"{name} not found")
        self.cluster.writes.append(("delete", res.__name__, name))

    def patch(self, res: Any, name: str, patch: Any, namespace: str | None = None, **_: Any) -> Any:
        self._check()
        obj = self.cluster.objects.get(_key(res, namespace, name))
        if obj is None:
            raise api_error(404, f"{name} not found")
        obj.metadata.finalizers = patch["metadata"]["finalizers"]
        self.cluster.writes.append(("patch", res.__name__, name))
        return copy.deepcopy(obj)


@dataclasses.dataclass
class Workload:
    """One unit's controller, as the charm's probes on 127.0.0.1 see it.

    ``reloads``: the controller serves the certificate files as soon as the charm writes
    them (else it keeps serving ``pinned`` until :meth:`reload`). ``ready``: it answers
    /readyz.
    """

    root: Path
    ready: bool = True
    reloads: bool = True
    pinned: str | None = None

    def _written(self) -> str | None:
        path = self.root / Path(WEBHOOK_CERT_DIR).relative_to("/etc/aitenant") / "tls.crt"
        return path.read_text() if path.exists() else None

    def serves(self) -> str | None:
        return self._written() if self.reloads else self.pinned

    def reload(self) -> None:
        self.pinned = self._written()


@dataclasses.dataclass
class SharedRelation:
    """A relation as every unit of the deployment sees it."""

    template: testing.RelationBase
    app_data: dict[str, str] = dataclasses.field(default_factory=dict)
    unit_data: dict[int, dict[str, str]] = dataclasses.field(default_factory=dict)

    @property
    def id(self) -> int:
        return self.template.id


class Unit:
    def __init__(self, deployment: Deployment, unit_id: int) -> None:
        self.id = unit_id
        self.name = f"{APP}/{unit_id}"
        self.ctx = new_context(unit_id)
        # The files the charm writes for the controller outlive the hook (ops.testing wipes
        # the rest of the simulated filesystem before each run).
        files = tempfile.mkdtemp(prefix=f"aitenant-unit-{unit_id}-")
        weakref.finalize(self, shutil.rmtree, files, True)
        container = new_container(
            Path(files),
            # As Juju starts it: the rock's own layer loaded before the charm plans anything.
            layers={"000-rock": testing.layer_from_rockcraft(ROOT / "rockcraft.yaml")},
        )
        self.state = testing.State(containers={container})
        self.workload = Workload(root=Path(files))
        self.deployment = deployment

    @property
    def container(self) -> testing.Container:
        return self.state.get_container(CONTAINER)


class Deployment:
    """One application in one model: its units, relations, secrets and config."""

    def __init__(
        self,
        cluster: FakeCluster | None,
        model: str = "maas",
        units: int = 1,
        *,
        pebble: Mapping[int, str] | None = None,
    ) -> None:
        self.cluster = cluster
        # Unit id -> the socket of that unit's real Pebble (None: ops.testing's Pebble).
        self.pebble = dict(pebble or {})
        self.model = testing.Model(name=model)
        self.units = [Unit(self, i) for i in range(units)]
        self.leader = 0
        # Units Juju plans for the application (default: every unit here has joined).
        self.planned_units: int | None = None
        self.config: dict[str, str | int | float | bool] = {}
        self.relations: dict[int, SharedRelation] = {}
        self.secrets: dict[str, testing.Secret] = {}
        self.peers: SharedRelation | None = None
        if "peers" in META:
            (endpoint,) = META["peers"]
            self.peers = self._add(testing.PeerRelation(endpoint))

    # --- arrange ---------------------------------------------------------------------

    def _add(self, template: testing.RelationBase) -> SharedRelation:
        shared = SharedRelation(template, unit_data={u.id: {} for u in self.units})
        self.relations[template.id] = shared
        return shared

    def relate(self, endpoint: str, remote_app: str, **data: Any) -> SharedRelation:
        return self._add(testing.Relation(endpoint, remote_app_name=remote_app, **data))

    def relate_gateway(self) -> SharedRelation:
        return self.relate(
            charm.GATEWAY_RELATION, "istio-ingress-k8s", remote_app_data=gateway_databag()
        )

    def relate_maas_api(self) -> SharedRelation:
        return self.relate(
            charm.MAAS_API_RELATION,
            "maas-api-k8s",
            remote_app_data=maas_api_databag(DEFAULT_MAAS_API),
        )

    def relate_cos(self) -> list[SharedRelation]:
        loki = {"endpoint": f'{{"url": "{LOKI_URL}"}}'}
        return [
            self.relate(charm.METRICS_RELATION, "prometheus-k8s"),
            self.relate(charm.DASHBOARD_RELATION, "grafana-k8s"),
            self.relate(charm.LOGGING_RELATION, "loki-k8s", remote_units_data={0: loki}),
        ]

    def unrelate(self, shared: SharedRelation) -> None:
        del self.relations[shared.id]

    # --- run -------------------------------------------------------------------------

    def state_for(self, unit: Unit) -> testing.State:
        relations: list[testing.RelationBase] = []
        for shared in self.relations.values():
            mine = shared.unit_data.setdefault(unit.id, {})
            if isinstance(shared.template, testing.PeerRelation):
                peers = {
                    u.id: dict(shared.unit_data.setdefault(u.id, {}))
                    for u in self.units
                    if u is not unit
                }
                relations.append(
                    dataclasses.replace(
                        shared.template,
                        local_app_data=dict(shared.app_data),
                        local_unit_data=dict(mine),
                        peers_data=peers,
                    )
                )
            else:
                relations.append(
                    dataclasses.replace(
                        shared.template,
                        local_app_data=dict(shared.app_data),
                        local_unit_data=dict(mine),
                    )
                )
        return dataclasses.replace(
            unit.state,
            leader=unit.id == self.leader,
            model=self.model,
            config=dict(self.config),
            relations=relations,
            secrets=list(self.secrets.values()),
            planned_units=self.planned_units or len(self.units),
        )

    def _unit_running(self) -> Unit:
        name = os.environ["JUJU_UNIT_NAME"]
        return next(u for u in self.units if u.name == name)

    @contextlib.contextmanager
    def _boundary(self) -> Iterator[None]:
        """The charm's API boundary and workload probes, answered for the running unit."""
        with contextlib.ExitStack() as stack:
            if self.pebble:
                sockets = {f"{APP}/{unit}": path for unit, path in self.pebble.items()}
                container_init = ops.Container.__init__

                # ops.Container takes the Pebble client to use (its public ``pebble_client``
                # argument): the running unit's real Pebble instead of the simulated one.
                def init(container: ops.Container, name: str, backend: Any, *_: Any) -> None:
                    socket = sockets[os.environ["JUJU_UNIT_NAME"]]
                    container_init(container, name, backend, ops.pebble.Client(socket_path=socket))

                stack.enter_context(patch.object(ops.Container, "__init__", init))
            if self.cluster is not None:
                self._fake_cluster(stack, self.cluster)
            else:
                # The real client: Juju ends the hook's process, which closes it; here, close
                # every client the hook made.
                made: list[Any] = []
                real = charm.Client

                def client(*args: Any, **kwargs: Any) -> Any:
                    made.append(real(*args, **kwargs))
                    return made[-1]

                stack.enter_context(patch.object(charm, "Client", client))
                stack.callback(lambda: [lightkube_private.close(c) for c in made])
            yield

    def _fake_cluster(self, stack: contextlib.ExitStack, cluster: FakeCluster) -> None:
        def client(**_: Any) -> FakeClient:
            return cluster.client(os.environ["JUJU_MODEL_NAME"])

        def count(client: Any, res: Any, namespace: str = "*") -> int:
            return len(cluster.of_kind(res))

        stack.enter_context(patch.object(charm, "Client", client))
        stack.enter_context(
            patch.object(lightkube_private, "api_version", lambda _: dict(cluster.version))
        )
        stack.enter_context(patch.object(lightkube_private, "count_objects", count))
        stack.enter_context(
            patch.object(
                webhook_trust,
                "served_certificate",
                lambda *_: self._unit_running().workload.serves(),
            )
        )
        stack.enter_context(
            patch.object(
                pebble_layer, "controller_ready", lambda *_: self._unit_running().workload.ready
            )
        )
        stack.enter_context(patch.object(webhook_trust, "WEBHOOK_SETTLE_SECONDS", 0.0))
        stack.enter_context(patch.object(pebble_layer, "CONTROLLER_START_SECONDS", 0.0))

    def run(
        self,
        unit: Unit | int,
        event: Callable[[testing.Context[AITenantCharm], testing.State], Any],
    ) -> ops.StatusBase:
        """Run one hook on ``unit`` (a fresh charm) and keep what it changed; its status."""
        unit = self.units[unit] if isinstance(unit, int) else unit
        state = self.state_for(unit)
        with self._boundary():
            out = unit.ctx.run(event(unit.ctx, state), state)
        self._keep(unit, out)
        return cast(ops.StatusBase, out.unit_status)

    def action(self, unit: Unit | int, name: str) -> dict[str, Any]:
        """Run an action; its results (raises ``testing.ActionFailed`` when it fails)."""
        unit = self.units[unit] if isinstance(unit, int) else unit
        state = self.state_for(unit)
        with self._boundary():
            try:
                out = unit.ctx.run(unit.ctx.on.action(name), state)
            except testing.ActionFailed as exc:
                self._keep(unit, cast(testing.State, exc.state))
                raise
        self._keep(unit, out)
        return dict(unit.ctx.action_results or {})

    def _keep(self, unit: Unit, out: testing.State) -> None:
        unit.state = out
        leader = unit.id == self.leader
        for relation in out.relations:
            shared = self.relations.get(relation.id)
            if shared is None:
                continue
            if leader:
                shared.app_data = dict(relation.local_app_data)
            shared.unit_data[unit.id] = dict(relation.local_unit_data)
        for secret in out.secrets:
            if secret.owner == "app" or secret.id in self.secrets:
                self.secrets[secret.id] = secret

    def settle(self) -> None:
        """What a fresh deployment's units go through: install to pebble-ready, on each."""
        for unit in self.units:
            self.run(unit, lambda ctx, state: ctx.on.install())
            if unit.id == self.leader:
                self.run(unit, lambda ctx, state: ctx.on.leader_elected())
            self.run(unit, lambda ctx, state: ctx.on.config_changed())
            self.run(unit, lambda ctx, state: ctx.on.start())
            self.run(unit, lambda ctx, state: ctx.on.pebble_ready(state.get_container(CONTAINER)))
        # The non-leaders' first hooks may have come before the leader's secrets existed.
        for unit in self.units:
            self.run(unit, lambda ctx, state: ctx.on.update_status())
