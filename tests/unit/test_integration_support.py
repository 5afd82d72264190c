"""The integration run's pure helpers (tests/integration/support.py), without a controller."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from aitenant import contract
from aitenant_charm import pebble_layer, workload
from aitenant_charm.config import CharmConfig
from aitenant_charm.flags import ControllerInputs, Gateway, controller_args
from charms.aitenant_k8s.v0.maas_api import MaasApiAppData
from tests.integration import support


def inputs(**config: object) -> ControllerInputs:
    """Controller inputs from options named as in Python (``aitenant_namespace``)."""
    return ControllerInputs(
        config=CharmConfig.model_validate(config),
        app="aitenant-k8s",
        gateway=Gateway(namespace="gw-ns", name="gw"),
        maas_api=MaasApiAppData(
            image="registry.example/maas-api:1", infra_namespace="infra", service_port=9000
        ),
        paths=workload.PATHS,
        ports=workload.PORTS,
    )


def plan_yaml(layer_inputs: ControllerInputs) -> str:
    """What `pebble plan` prints once the charm's layer is the plan."""
    layer = pebble_layer.construct_layer(layer_inputs, namespace="model")
    return yaml.safe_dump(layer.to_dict())


def test_controller_flags_read_back_what_the_charm_planned() -> None:
    # GIVEN the layer the charm plans from config and relation data
    planned = inputs(aitenant_namespace="it-at", enable_tenant_namespace_discovery=False)
    # WHEN the plan's YAML is read back
    flags = support.controller_flags(plan_yaml(planned))
    # THEN every flag of the command line is there with its value
    pairs = (arg.removeprefix("--").split("=", 1) for arg in controller_args(planned)[1:])
    expected = {name: value for name, value in pairs}
    assert flags == expected
    assert flags["aitenant-namespace"] == "it-at"
    assert flags["enable-tenant-namespace-discovery"] == "false"
    assert flags["infra-namespace"] == "infra"
    assert flags["maas-api-url-template"].endswith(":9000/internal/v1/tenants/{tenant}/api-keys")


def test_controller_flags_keep_an_equals_sign_inside_a_value() -> None:
    plan = {"services": {support.SERVICE: {"command": "aitenant-controller '--x=a=b' --y="}}}
    assert support.controller_flags(yaml.safe_dump(plan)) == {"x": "a=b", "y": ""}


@pytest.mark.parametrize(
    "plan",
    [
        {},
        {"services": {"other": {"command": "x --a=b"}}},
        {"services": {support.SERVICE: {"override": "replace"}}},
    ],
)
def test_a_plan_without_the_controller_service_is_an_error(plan: dict[str, object]) -> None:
    with pytest.raises(KeyError, match=support.SERVICE):
        support.controller_flags(yaml.safe_dump(plan))


def test_a_positional_argument_is_an_error() -> None:
    plan = {"services": {support.SERVICE: {"command": "aitenant-controller run --a=b"}}}
    with pytest.raises(ValueError, match="'run'"):
        support.controller_flags(yaml.safe_dump(plan))


def test_service_state_reads_the_services_table() -> None:
    # GIVEN what `pebble services --abs-time` prints (tab-aligned columns)
    text = (
        "Service              Startup  Current  Since\n"
        "aitenant-controller  enabled  active   2026-12-06T02:30:01Z\n"
        "other                enabled  inactive -\n"
    )
    # THEN each service's state and since when
    state = support.service_state(text)
    assert state == support.ServiceState(current="active", since="2026-12-06T02:30:01Z")
    assert support.service_state(text, "other") == support.ServiceState("inactive", "-")
    with pytest.raises(KeyError, match="absent"):
        support.service_state(text, "absent")
    with pytest.raises(ValueError, match="not the output"):
        support.service_state("Plan has no services.")


@pytest.mark.parametrize(
    ("value", "keep"),
    [(None, False), ("", False), ("0", False), ("no", False), ("1", True), (" TRUE ", True)],
)
def test_env_flag(value: str | None, keep: bool) -> None:
    assert support.env_flag(value) is keep


def test_model_config_pairs() -> None:
    given = "charmhub-url=http://127.0.0.1:1 'juju-no-proxy=10.0.0.0/8,127.0.0.1' x="
    assert support.model_config(given) == {
        "charmhub-url": "http://127.0.0.1:1",
        "juju-no-proxy": "10.0.0.0/8,127.0.0.1",
        "x": "",
    }
    assert support.model_config(None) == {}
    with pytest.raises(ValueError, match="'logging'"):
        support.model_config("logging")


def test_packed_charm_is_the_one_of_its_name(tmp_path: Path) -> None:
    (tmp_path / "aitenant-k8s_amd64.charm").touch()
    (tmp_path / "maas-api-tester_amd64.charm").touch()
    assert support.packed_charm(tmp_path, "aitenant-k8s").name == "aitenant-k8s_amd64.charm"
    with pytest.raises(FileNotFoundError, match="found none"):
        support.packed_charm(tmp_path, "other")
    (tmp_path / "aitenant-k8s_arm64.charm").touch()
    with pytest.raises(FileNotFoundError, match=r"aitenant-k8s_amd64\.charm, aitenant-k8s_arm64"):
        support.packed_charm(tmp_path, "aitenant-k8s")


def test_run_names_carry_the_model_suffix() -> None:
    names = support.RunNames("jubilant-1a2b3c4d")
    assert names.tenant == "it-1a2b3c4d"
    assert {names.gateway_namespace, names.aitenant_namespace, names.infra_namespace} == {
        "it-gw-1a2b3c4d",
        "it-at-1a2b3c4d",
        "it-infra-1a2b3c4d",
    }
    # The tenant namespace is a DNS label: ai-tenant-<name> stays well within 63 characters.
    assert len(f"{contract.TENANT_NAMESPACE_PREFIX}{names.tenant}") <= 63


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """An HTTPS server on loopback answering as the webhook does: refusing every review."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append({"path": self.path, **review})
            answer = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": review["request"]["uid"],
                    "allowed": False,
                    "status": {"code": 403, "message": "refused here"},
                },
            }
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server = HTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_webhook_probe_posts_the_review_and_prints_the_answer(
    webhook: tuple[int, list[dict[str, Any]]],
) -> None:
    # GIVEN an AdmissionReview for an AITenant
    port, received = webhook
    obj = {
        "apiVersion": contract.API_VERSION,
        "kind": "AITenant",
        "metadata": {"name": "t", "namespace": "elsewhere"},
        "spec": {"gateway": {"name": "gw"}},
    }
    body = support.admission_review(obj)
    # WHEN the probe command runs in a shell, as `juju exec` runs it
    command = support.webhook_probe_command(body, port=port, path=contract.WEBHOOK_PATH)
    done = subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, timeout=30, check=True
    )
    # THEN the webhook got the review at its path, and the refusal is read from the answer
    assert received[0]["path"] == contract.WEBHOOK_PATH
    request = received[0]["request"]
    assert request["object"] == obj
    assert request["kind"] == {
        "group": contract.GROUP,
        "version": contract.VERSION,
        "kind": "AITenant",
    }
    assert request["resource"]["resource"] == "aitenants"
    assert request["namespace"] == "elsewhere"
    assert support.refusal_message(done.stdout) == "refused here"


def test_refusal_message_is_empty_when_allowed() -> None:
    assert support.refusal_message('{"response": {"uid": "u", "allowed": true}}') == ""
