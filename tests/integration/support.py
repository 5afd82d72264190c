"""Pure helpers of the integration run (no Juju, no cluster): what the environment asks for,
the names one run uses, and what a unit's Pebble plan says the controller runs with.

Kept apart from ``test_charm.py`` so the unit tests (tests/unit/test_integration_support.py)
check them without a controller.
"""

from __future__ import annotations

import base64
import json
import shlex
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# The controller's Pebble service (src/aitenant_charm/workload.py: SERVICE).
SERVICE = "aitenant-controller"
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


def env_flag(value: str | None) -> bool:
    """A yes/no environment variable (``AITENANT_KEEP_MODEL``): unset or empty is no."""
    return (value or "").strip().lower() in TRUE_WORDS


def model_config(value: str | None) -> dict[str, str]:
    """``AITENANT_MODEL_CONFIG``: ``key=value`` pairs separated by blanks, as `juju add-model
    --config` takes them (a machine that reaches no Charmhub sets ``charmhub-url`` there)."""
    config: dict[str, str] = {}
    for pair in shlex.split(value or ""):
        key, sep, setting = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"AITENANT_MODEL_CONFIG: {pair!r} is not key=value")
        config[key] = setting
    return config


def packed_charm(directory: Path, name: str) -> Path:
    """The one ``<name>_*.charm`` that scripts/pack-charm wrote into ``directory``."""
    found = sorted(directory.glob(f"{name}_*.charm"))
    if len(found) != 1:
        listed = ", ".join(p.name for p in found) or "none"
        raise FileNotFoundError(f"expected one {name}_*.charm in {directory}, found {listed}")
    return found[0]


@dataclass(frozen=True)
class RunNames:
    """The names one run gives what it makes on the cluster. AITenant names and their tenant
    namespaces (``ai-tenant-<name>``) are cluster-wide, so each carries the model's suffix."""

    model: str

    @property
    def suffix(self) -> str:
        return self.model.rsplit("-", 1)[-1]

    @property
    def tenant(self) -> str:
        return f"it-{self.suffix}"

    @property
    def gateway_namespace(self) -> str:
        return f"it-gw-{self.suffix}"

    @property
    def default_gateway(self) -> str:
        """The Gateway the charm's `gateway-name` names (the default tenant's)."""
        return "it-default"

    @property
    def aitenant_namespace(self) -> str:
        return f"it-at-{self.suffix}"

    @property
    def infra_namespace(self) -> str:
        return f"it-infra-{self.suffix}"


def controller_command(plan: Mapping[str, Any]) -> list[str]:
    """The controller's command line in a Pebble plan (``pebble plan``'s YAML, loaded)."""
    services = plan.get("services") or {}
    service = services.get(SERVICE)
    if not service or not service.get("command"):
        raise KeyError(f"the plan has no {SERVICE} service with a command")
    return shlex.split(str(service["command"]))


def controller_flags(plan_yaml: str) -> dict[str, str]:
    """Every ``--flag=value`` of the controller's command in ``pebble plan``'s output."""
    plan = yaml.safe_load(plan_yaml) or {}
    flags: dict[str, str] = {}
    for arg in controller_command(plan)[1:]:
        if not arg.startswith("--"):
            raise ValueError(f"unexpected argument {arg!r} in the controller's command")
        name, _, value = arg[2:].partition("=")
        flags[name] = value
    return flags


@dataclass(frozen=True)
class ServiceState:
    """One line of ``pebble services --abs-time``: the service's state and since when (RFC
    3339; "-" when Pebble never started it)."""

    current: str
    since: str


def service_state(services_text: str, service: str = SERVICE) -> ServiceState:
    """``service``'s line in ``pebble services --abs-time`` (a table: Service, Startup, Current,
    Since); read from the text, which every Pebble version prints."""
    lines = [line.split() for line in services_text.splitlines() if line.strip()]
    if not lines or lines[0][:4] != ["Service", "Startup", "Current", "Since"]:
        raise ValueError(f"not the output of `pebble services`: {services_text!r}")
    for fields in lines[1:]:
        if fields[0] == service and len(fields) == 4:
            return ServiceState(current=fields[2], since=fields[3])
    raise KeyError(f"no service {service} in {services_text!r}")


def webhook_probe_command(body: bytes, *, port: int, path: str) -> str:
    """A shell command that POSTs the AdmissionReview ``body`` to the webhook on the unit's
    own loopback (a pod shares one network namespace) and prints the answer. It runs in the
    charm container (`juju exec`), whose Python has no package of ours: the standard
    library only, no verification (loopback, and the answer is what is checked)."""
    script = (
        "import base64,ssl,sys,urllib.request as u;"
        f"r=u.Request('https://127.0.0.1:{port}{path}',"
        "data=base64.b64decode(sys.argv[1]),"
        "headers={'Content-Type':'application/json'});"
        "print(u.urlopen(r,context=ssl._create_unverified_context(),timeout=10).read().decode())"
    )
    return shlex.join(["python3", "-c", script, base64.b64encode(body).decode()])


def admission_review(obj: Mapping[str, Any]) -> bytes:
    """The AdmissionReview the API server sends the webhook for the CREATE of ``obj`` (an
    object of our group and version: an AITenant)."""
    api_version = str(obj["apiVersion"])
    group, _, version = api_version.rpartition("/")
    kind = str(obj["kind"])
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "operation": "CREATE",
                "kind": {"group": group, "version": version, "kind": kind},
                "resource": {"group": group, "version": version, "resource": f"{kind.lower()}s"},
                "namespace": obj["metadata"]["namespace"],
                "object": dict(obj),
            },
        }
    ).encode()


def refusal_message(answer: str) -> str:
    """The message of a refused AdmissionReview answer (the webhook's JSON); "" if allowed."""
    response = json.loads(answer)["response"]
    if response.get("allowed"):
        return ""
    return str((response.get("status") or {}).get("message") or "")
