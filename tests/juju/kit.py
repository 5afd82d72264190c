"""Shared helpers for the charm's tests: the fake API seam and a few setup verbs.

The charm runs through ``ops.testing`` as Juju runs it: each event is one ``Context.run``, a
fresh charm built from the previous run's output state. The only thing faked at the API
boundary is the lightkube ``Client`` class the charm constructs (patched as ``charm.Client``).
"""

from __future__ import annotations

import dataclasses
import datetime
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from unittest.mock import MagicMock

import httpx2
import ops
import yaml
from charmlibs.interfaces.gateway_metadata import GatewayMetadata
from lightkube.core.exceptions import ApiError
from ops import testing

import charm
from aitenant_charm import pki
from aitenant_charm.workload import CONTAINER, SERVICE, WEBHOOK_CERT_DIR
from charm import AITenantCharm
from charms.aitenant_k8s.v0.maas_api import MaasApiAppData

ROOT = Path(__file__).resolve().parents[2]
META = yaml.safe_load((ROOT / "metadata.yaml").read_text())
CHARMCRAFT = yaml.safe_load((ROOT / "charmcraft.yaml").read_text())
APP = "aitenant-k8s"
MODEL = "maas"
# Where the charm writes the controller's files; a Mount, since ops.testing wipes the rest of
# the simulated filesystem before each run.
WORKLOAD_FILES = str(Path(WEBHOOK_CERT_DIR).parent)
# What the fake API server answers on /version (the e2e suite's version).
SERVER_VERSION = {"major": "1", "minor": "37", "gitVersion": "v1.37.2"}

DEFAULT_MAAS_API = MaasApiAppData(
    image="quay.io/opendatahub/maas-api:v1",
    infra_namespace="maas-infra",
    service_name="maas-api",
    service_port=8443,
    db_secret="maas-db-config",
)


def api_error(code: int, message: str = "boom") -> ApiError:
    """An ApiError as lightkube raises it for an HTTP error status."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "code": code,
    }
    request = httpx2.Request("GET", "https://kubernetes.default.svc/apis")
    return ApiError(request=request, response=httpx2.Response(code, json=body, request=request))


@dataclass
class PrivateCalls:
    """The charm's calls into lightkube's private API (``aitenant_charm.lightkube_private``),
    as mocks."""

    version: MagicMock  # api_version(client) -> the /version document
    count: MagicMock  # count_objects(client, res) -> how many objects


def gateway_databag(namespace: str = "istio-gw", name: str = "maas-gateway") -> dict[str, str]:
    """What the `gateway` relation's provider publishes for Gateway ``namespace/name``."""
    metadata = GatewayMetadata(
        namespace=namespace, gateway_name=name, deployment_name=name, service_account=name
    )
    return {"metadata": metadata.model_dump_json()}


def maas_api_databag(data: MaasApiAppData = DEFAULT_MAAS_API) -> dict[str, str]:
    bag: dict[str, str] = {}
    data.dump(bag)
    return bag


Event = Callable[[testing.Context[AITenantCharm], testing.State], Any]


def new_context(unit_id: int = 0) -> testing.Context[AITenantCharm]:
    """The charm as Juju runs unit ``unit_id`` of `aitenant-k8s`."""
    return testing.Context(
        AITenantCharm,
        meta=META,
        actions=CHARMCRAFT["actions"],
        config=CHARMCRAFT["config"],
        app_name=APP,
        unit_id=unit_id,
    )


def new_container(files: Path, **fields: Any) -> testing.Container:
    """The workload container, its files in ``files`` so they outlive each run."""
    mounts = {"files": testing.Mount(location=WORKLOAD_FILES, source=files)}
    return testing.Container(CONTAINER, can_connect=True, mounts=mounts, **fields)


@dataclass(frozen=True)
class ActionOutput:
    results: dict[str, Any]
    logs: list[str]


class CharmKit:
    """One unit (`aitenant-k8s/0` in model `maas`, leader, container reachable) and the verbs
    tests use to arrange a scenario: every verb that Juju would follow with a hook runs it."""

    def __init__(self, kube: MagicMock, private: PrivateCalls, files: Path) -> None:
        self.kube = kube
        self.private = private
        self.files = files
        files.mkdir(parents=True, exist_ok=True)
        self.ctx = new_context()
        self.state = testing.State(
            leader=True, model=testing.Model(name=MODEL), containers={new_container(files)}
        )

    # --- run -------------------------------------------------------------------------

    def run(self, event: Event) -> testing.State:
        """Run one hook on a fresh charm; keep its output state for the next."""
        self.state = self.ctx.run(event(self.ctx, self.state), self.state)
        return self.state

    def emit(self, name: str) -> None:
        """A hook without arguments: ``update_status``, ``config_changed``, ``remove``..."""
        self.run(lambda ctx, _: getattr(ctx.on, name)())

    def reconcile(self) -> None:
        """Fire an event that goes to _reconcile (pebble-ready also needs the container)."""
        if self.state.get_container(CONTAINER).can_connect:
            self.run(lambda ctx, state: ctx.on.pebble_ready(state.get_container(CONTAINER)))
        else:
            self.emit("config_changed")

    def run_action(self, name: str) -> ActionOutput:
        """Run an action; raises ``testing.ActionFailed`` (its output state kept) on failure."""
        try:
            self.run(lambda ctx, _: ctx.on.action(name))
        except testing.ActionFailed as exc:
            self.state = cast(testing.State, exc.state)
            raise
        return ActionOutput(dict(self.ctx.action_results or {}), list(self.ctx.action_logs))

    # --- arrange -----------------------------------------------------------------------

    def replace(self, **fields: Any) -> None:
        """Change what Juju holds for the next hook (no hook runs)."""
        self.state = dataclasses.replace(self.state, **fields)

    def set_leader(self, leader: bool) -> None:
        """Juju sends leader-elected to a new leader only."""
        self.replace(leader=leader)
        if leader:
            self.emit("leader_elected")

    def set_container(self, **fields: Any) -> None:
        container = dataclasses.replace(self.state.get_container(CONTAINER), **fields)
        others = {c for c in self.state.containers if c.name != CONTAINER}
        self.replace(containers={*others, container})

    def set_check(self, name: str, status: ops.pebble.CheckStatus) -> None:
        checks = {c.name: c for c in self.container.check_infos}
        info = checks.pop(name, None) or testing.CheckInfo(name)
        changed = dataclasses.replace(info, status=status)
        self.set_container(check_infos={*checks.values(), changed})

    def update_config(self, options: Mapping[str, str | int | float | bool]) -> None:
        """Set options named as `juju config` names them; config-changed follows."""
        self.replace(config={**self.state.config, **options})
        self.emit("config_changed")

    def configure(self, **options: Any) -> None:
        """Set config options given in snake_case (``gateway_name=...``)."""
        self.update_config({k.replace("_", "-"): v for k, v in options.items()})

    def relate(
        self,
        endpoint: str,
        remote_app: str,
        *,
        app_data: Mapping[str, str] | None = None,
        units: Mapping[int, Mapping[str, str]] | None = None,
    ) -> int:
        """Add a relation to ``remote_app`` (one unit, ``/0``, unless ``units`` says), with
        the hooks Juju sends: created, joined per remote unit, changed when the remote side
        has data. Its id."""
        units = {0: {}} if units is None else units
        relation = testing.Relation(
            endpoint,
            remote_app_name=remote_app,
            remote_app_data=dict(app_data or {}),
            remote_units_data={unit: dict(bag) for unit, bag in units.items()},
        )
        self.replace(relations={*self.state.relations, relation})
        self.run(lambda ctx, state: ctx.on.relation_created(state.get_relation(relation.id)))
        for unit in units:
            self.run(
                lambda ctx, state, unit=unit: ctx.on.relation_joined(
                    state.get_relation(relation.id), remote_unit=unit
                )
            )
        if app_data or any(units.values()):
            self._relation_changed(relation.id, remote_unit=min(units))
        return relation.id

    def update_relation_data(
        self,
        relation_id: int,
        *,
        app_data: Mapping[str, str] | None = None,
        unit: int | None = None,
        unit_data: Mapping[str, str] | None = None,
    ) -> None:
        """The remote app publishes ``app_data``, or its ``unit`` publishes ``unit_data``;
        relation-changed follows."""
        relation = self.relation(relation_id)
        units = dict(relation.remote_units_data)
        if unit is not None:
            units[unit] = {**units.get(unit, {}), **(unit_data or {})}
        changed = dataclasses.replace(
            relation,
            remote_app_data={**relation.remote_app_data, **(app_data or {})},
            remote_units_data=units,
        )
        others = {r for r in self.state.relations if r.id != relation_id}
        self.replace(relations={*others, changed})
        self._relation_changed(relation_id, remote_unit=min(units) if unit is None else unit)

    def _relation_changed(self, relation_id: int, *, remote_unit: int) -> None:
        self.run(
            lambda ctx, state: ctx.on.relation_changed(
                state.get_relation(relation_id), remote_unit=remote_unit
            )
        )

    def remove_relation(self, relation_id: int) -> None:
        """relation-broken, then the relation is gone."""
        self.run(lambda ctx, state: ctx.on.relation_broken(state.get_relation(relation_id)))
        self.replace(relations={r for r in self.state.relations if r.id != relation_id})

    def integrate_maas_api(self, data: MaasApiAppData | None = DEFAULT_MAAS_API) -> int:
        bag = maas_api_databag(data) if data is not None else {}
        return self.relate(charm.MAAS_API_RELATION, "maas-api-k8s", app_data=bag)

    def integrate_gateway(self, namespace: str = "istio-gw", name: str = "maas-gateway") -> int:
        bag = gateway_databag(namespace, name)
        return self.relate(charm.GATEWAY_RELATION, "istio-ingress-k8s", app_data=bag)

    def set_secret_content(self, label: str, content: dict[str, str]) -> None:
        """A new revision of the secret with ``label`` (no hook runs)."""
        secret = self.state.get_secret(label=label)
        others = {s for s in self.state.secrets if s.id != secret.id}
        self.replace(secrets={*others, dataclasses.replace(secret, latest_content=content)})

    def make_ready(self) -> None:
        """Everything a healthy deployment has: gateway, maas-api, container up."""
        self.integrate_gateway()
        self.integrate_maas_api()
        self.reconcile()

    # --- observe -----------------------------------------------------------------------

    @property
    def container(self) -> testing.Container:
        return self.state.get_container(CONTAINER)

    def relation(self, relation_id: int) -> testing.Relation:
        return cast(testing.Relation, self.state.get_relation(relation_id))

    def status(self) -> ops.StatusBase:
        """The unit's status after the last hook (collect-status ends every hook)."""
        return cast(ops.StatusBase, self.state.unit_status)

    def plan(self) -> ops.pebble.Plan:
        return self.container.plan

    def service(self) -> ops.pebble.Service:
        return self.plan().services[SERVICE]

    def service_running(self) -> bool:
        return self.container.service_statuses.get(SERVICE) == ops.pebble.ServiceStatus.ACTIVE

    def args(self) -> list[str]:
        return shlex.split(self.service().command)

    def flags(self) -> dict[str, str]:
        return dict(arg.removeprefix("--").split("=", 1) for arg in self.args()[1:])

    def path(self, path: str) -> Path:
        """Where a file the charm wrote in the workload is."""
        return self.files / Path(path).relative_to(WORKLOAD_FILES)

    def read(self, path: str) -> str:
        return self.path(path).read_text()

    def secret(self, label: str) -> dict[str, str]:
        return dict(self.state.get_secret(label=label).latest_content)

    def has_secret(self, label: str) -> bool:
        return any(secret.label == label for secret in self.state.secrets)

    def server_version(self, major: str, minor: str) -> None:
        """Make the fake API server report another version on /version."""
        self.private.version.return_value = {"major": major, "minor": minor}

    def applied(self, kind: type) -> list[Any]:
        """Objects of ``kind`` passed to Client.apply, in order."""
        return [c.args[0] for c in self.kube.apply.call_args_list if isinstance(c.args[0], kind)]


def near_expiry_ca(now: datetime.datetime) -> pki.KeyPair:
    """A CA with about a tenth of its life left."""
    return pki.generate_ca(
        "old CA", now=now - datetime.timedelta(days=330), validity=datetime.timedelta(days=365)
    )
