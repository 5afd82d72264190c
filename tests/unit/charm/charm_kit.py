"""Shared helpers for the charm's Harness tests: the fake API seam and a few setup verbs.

The only thing faked is the lightkube ``Client`` class the charm constructs (patched as
``charm.Client``); everything else is the real charm with ``ops.testing.Harness``.
"""

from __future__ import annotations

import datetime
import shlex
from dataclasses import dataclass
from typing import Any
from unittest.mock import MagicMock

import httpx2
import ops
from charmlibs.interfaces.gateway_metadata import GatewayMetadata
from lightkube.core.exceptions import ApiError
from ops import testing

import charm
from aitenant_charm import pki
from aitenant_charm.workload import CONTAINER, SERVICE
from charm import AITenantCharm
from charms.aitenant_k8s.v0.maas_api import MaasApiAppData

APP = "aitenant-k8s"
MODEL = "maas"
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


def maas_api_databag(data: MaasApiAppData = DEFAULT_MAAS_API) -> dict[str, str]:
    bag: dict[str, str] = {}
    data.dump(bag)
    return bag


class CharmKit:
    """One Harness plus the verbs tests use to arrange a scenario."""

    def __init__(
        self, harness: testing.Harness[AITenantCharm], kube: MagicMock, private: PrivateCalls
    ):
        self.harness = harness
        self.kube = kube
        self.private = private

    @property
    def charm(self) -> AITenantCharm:
        return self.harness.charm

    @property
    def container(self) -> ops.Container:
        return self.harness.model.unit.get_container(CONTAINER)

    # --- arrange -----------------------------------------------------------------------

    def integrate_maas_api(self, data: MaasApiAppData | None = DEFAULT_MAAS_API) -> int:
        bag = maas_api_databag(data) if data is not None else {}
        return self.harness.add_relation(charm.MAAS_API_RELATION, "maas-api-k8s", app_data=bag)

    def integrate_gateway(self, namespace: str = "istio-gw", name: str = "maas-gateway") -> int:
        metadata = GatewayMetadata(
            namespace=namespace,
            gateway_name=name,
            deployment_name=name,
            service_account=name,
        )
        return self.harness.add_relation(
            charm.GATEWAY_RELATION,
            "istio-ingress-k8s",
            app_data={"metadata": metadata.model_dump_json()},
        )

    def configure(self, **options: Any) -> None:
        """Set config options given in snake_case (``gateway_name=...``)."""
        self.harness.update_config({k.replace("_", "-"): v for k, v in options.items()})

    def make_ready(self) -> None:
        """Everything a healthy deployment has: gateway, maas-api, container up."""
        self.integrate_gateway()
        self.integrate_maas_api()
        self.reconcile()

    def reconcile(self) -> None:
        """Fire an event that goes to _reconcile (pebble-ready also needs the container)."""
        if self.harness.model.unit.get_container(CONTAINER).can_connect():
            self.harness.container_pebble_ready(CONTAINER)
        else:
            self.harness.charm.on.config_changed.emit()

    # --- observe -----------------------------------------------------------------------

    def status(self) -> ops.StatusBase:
        self.harness.evaluate_status()
        return self.harness.model.unit.status

    def service(self) -> ops.pebble.Service:
        return self.harness.get_container_pebble_plan(CONTAINER).services[SERVICE]

    def args(self) -> list[str]:
        return shlex.split(self.service().command)

    def flags(self) -> dict[str, str]:
        return dict(arg.removeprefix("--").split("=", 1) for arg in self.args()[1:])

    def read(self, path: str) -> str:
        with self.container.pull(path) as f:
            return f.read()

    def secret(self, label: str) -> dict[str, str]:
        return self.harness.model.get_secret(label=label).get_content(refresh=True)

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
