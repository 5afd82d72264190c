#!/usr/bin/env python3
"""Validate charmcraft.yaml, metadata.yaml and rockcraft.yaml before packing, without packing.

Two checks, both always run (the lint env installs charmcraft: pyproject.toml's ``charmcraft``
group); each refuses misspelt keys the other lets through:

- charmcraft's own (:func:`charmcraft_errors`): ``charmcraft expand-extensions`` loads
  charmcraft.yaml through charmcraft's project model and its plugins' schemas (a misspelt
  top-level or part key such as ``actoins:`` or ``uv-group:`` fails), and charmcraft's models
  ``JujuConfig`` and ``CharmMetadata`` validate the config options (``defualt:``,
  ``type: strng``) and metadata.yaml (its URLs, its types). None of this needs LXD or snapd.
- ours (:func:`our_errors`): what charmcraft lets through and the charm relies on. Keys
  ``CharmMetadata`` ignores (it accepts a misspelt ``interfce:`` or ``requirs:``), the actions
  (charmcraft 4.5.0's ``JujuActions`` model refuses every input, so it is not called), the
  names, types and defaults of the options the charm reads, its container, resource and
  relations, and the controller's image (rockcraft.yaml).

    python3 scripts/check_charm_metadata.py [ROOT]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pydantic
import yaml
from charmcraft.models.config import JujuConfig
from charmcraft.models.metadata import CharmMetadata

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "check-charm-metadata"


def _load(root: Path, name: str, errors: list[str]) -> dict[str, Any]:
    path = root / name
    if not path.is_file():
        errors.append(f"{name}: missing")
        return {}
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        errors.append(f"{name}: not valid YAML: {' '.join(str(exc).split())}")
        return {}
    if not isinstance(data, dict):
        errors.append(f"{name}: top level must be a mapping")
        return {}
    return data


# --- charmcraft's own validation ---


def _one_line(output: str) -> str:
    """charmcraft's error report on one line: its message, without the pointers to logs and
    documentation, the rejected input's dump or a traceback."""
    lines = output.splitlines()
    # A traceback (charmcraft re-raises when it thinks it runs in a test): its last exception.
    raised = [i for i, line in enumerate(lines) if re.match(r"^[\w.]+(Error|Exception): ", line)]
    if raised:
        lines = lines[raised[-1] :]
        lines[0] = lines[0].split(": ", 1)[1]
    lines = [line.strip() for line in lines if line.strip()]
    kept: list[str] = []
    for line in lines:
        if line.startswith(("Full execution log", "For further information")):
            continue
        line = re.sub(r"^charmcraft internal error: ", "", line)
        kept.append(re.sub(r"\s*\[type=.*$", "", line))
    return ": ".join(kept) or "no message"


def _pydantic_errors(name: str, where: str, exc: pydantic.ValidationError) -> list[str]:
    return [
        f"{name}: {'.'.join(str(part) for part in (where, *error['loc']) if part != '')}: "
        f"{error['msg']}"
        for error in exc.errors()
    ]


def charmcraft_errors(root: Path = ROOT) -> list[str]:
    """What charmcraft itself refuses in ``root``'s charmcraft.yaml and metadata.yaml."""
    errors: list[str] = []
    # charmcraft writes a log of every run and warns without a private runtime directory:
    # both go to a directory of this run's.
    with tempfile.TemporaryDirectory(prefix="charmcraft-") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env |= {"XDG_STATE_HOME": home, "XDG_RUNTIME_DIR": home}
        result = subprocess.run(
            [sys.executable, "-m", "charmcraft", "expand-extensions"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if result.returncode != 0:
        errors.append(
            f"charmcraft.yaml: charmcraft expand-extensions refused it: {_one_line(result.stderr)}"
        )

    charmcraft = _load(root, "charmcraft.yaml", errors)
    if "config" in charmcraft:
        try:
            JujuConfig.model_validate(charmcraft["config"])
        except pydantic.ValidationError as exc:
            errors += _pydantic_errors("charmcraft.yaml", "config", exc)
    metadata = _load(root, "metadata.yaml", errors)
    if metadata:
        try:
            CharmMetadata.model_validate(metadata)
        except pydantic.ValidationError as exc:
            errors += _pydantic_errors("metadata.yaml", "", exc)
    return errors


# --- ours: what charmcraft does not check and the charm relies on ---

# The options src/aitenant_charm/config.py reads: (type, default).
EXPECTED_OPTIONS: dict[str, tuple[str, object]] = {
    "aitenant-namespace": ("string", "ai-tenants"),
    "enable-tenant-namespace-discovery": ("boolean", True),
    "gateway-namespace": ("string", ""),
    "gateway-name": ("string", ""),
    "infra-namespace": ("string", ""),
    "maas-subscription-namespace": ("string", "models-as-a-service"),
    "deletion-timeout": ("string", "10m"),
    "manage-default-tenant": ("boolean", True),
    "authorino-namespaces": ("string", "kuadrant-system,openshift-operators,rh-connectivity-link"),
    "gateway-pod-selector": ("string", "gateway.networking.k8s.io/gateway-name={gateway}"),
    "maas-api-max-replicas": ("int", 3),
    "log-level": ("string", "info"),
}
# CharmMetadata ignores unknown keys, at every level: these are the ones Juju knows.
METADATA_KEYS = {
    "name", "display-name", "summary", "description", "website", "source", "issues",
    "docs", "contact", "maintainers", "terms", "assumes", "containers", "resources",
    "requires", "provides", "peers", "storage", "devices", "extra-bindings", "subordinate",
    "charm-user",
}  # fmt: skip
RELATION_KEYS = {"interface", "limit", "optional", "scope", "description"}
CONTAINER_KEYS = {"resource", "mounts", "bases", "uid", "gid"}
RESOURCE_KEYS = {"type", "description", "filename", "upstream-source"}
# An action's keys as Juju reads them (actions are checked here: see the module docstring).
ACTION_KEYS = {"description", "params", "required", "additionalProperties", "execution-group",
               "parallel"}  # fmt: skip
ACTION_NAME = re.compile(r"^[a-z](?:[a-z0-9-]*[a-z0-9])?$")


def our_errors(root: Path = ROOT) -> list[str]:
    """What the charm relies on in ``root``'s three files, beyond charmcraft's checks."""
    errors: list[str] = []

    def need(name: str, data: dict[str, Any], dotted: str, expected: object = None,
             kind: type | None = None) -> Any:  # fmt: skip
        node: Any = data
        for key in dotted.split("."):
            if not isinstance(node, dict) or key not in node:
                errors.append(f"{name}: missing key {dotted}")
                return None
            node = node[key]
        if expected is not None and node != expected:
            errors.append(f"{name}: {dotted} is {node!r}, expected {expected!r}")
        if kind is not None and not isinstance(node, kind):
            errors.append(f"{name}: {dotted} must be a {kind.__name__}")
        return node

    def unknown(where: str, mapping: object, allowed: set[str], name: str = "metadata.yaml"):
        if not isinstance(mapping, dict):
            errors.append(f"{name}: {where} must be a mapping")
            return
        for key in sorted(set(mapping) - allowed):
            errors.append(f"{name}: unknown key {key!r} in {where}")

    charmcraft = _load(root, "charmcraft.yaml", errors)
    metadata = _load(root, "metadata.yaml", errors)
    rock = _load(root, "rockcraft.yaml", errors)

    # charmcraft.yaml: build and config only; identity lives in metadata.yaml.
    need("charmcraft.yaml", charmcraft, "type", "charm")
    need("charmcraft.yaml", charmcraft, "base", "ubuntu@24.04")
    platforms = need("charmcraft.yaml", charmcraft, "platforms", kind=dict)
    if isinstance(platforms, dict) and "amd64" not in platforms:
        errors.append("charmcraft.yaml: platforms must include amd64")
    charm_part = need("charmcraft.yaml", charmcraft, "parts.charm", kind=dict) or {}
    if charm_part.get("plugin") != "uv" or charm_part.get("uv-groups") != ["charm"]:
        errors.append("charmcraft.yaml: parts.charm must use the uv plugin with uv-groups [charm]")
    for key in ("name", "summary", "description", "containers", "requires", "resources"):
        if key in charmcraft:
            errors.append(f"charmcraft.yaml: {key} belongs in metadata.yaml")
    options = need("charmcraft.yaml", charmcraft, "config.options", kind=dict) or {}
    for option, (kind, default) in EXPECTED_OPTIONS.items():
        spec = options.get(option)
        if not isinstance(spec, dict):
            errors.append(f"charmcraft.yaml: config option {option} missing")
            continue
        if spec.get("type") != kind:
            errors.append(f"charmcraft.yaml: {option} type {spec.get('type')!r}, expected {kind!r}")
        if spec.get("default") != default:
            errors.append(
                f"charmcraft.yaml: {option} default {spec.get('default')!r}, expected {default!r}"
            )
        if not spec.get("description"):
            errors.append(f"charmcraft.yaml: {option} has no description")
    for option in sorted(set(options) - set(EXPECTED_OPTIONS)):
        errors.append(f"charmcraft.yaml: unexpected config option {option}")

    # charmcraft.yaml: the actions, which charmcraft's model cannot check.
    actions = need("charmcraft.yaml", charmcraft, "actions", kind=dict) or {}
    for action, spec in actions.items():
        if not ACTION_NAME.match(str(action)):
            errors.append(f"charmcraft.yaml: invalid action name {action!r}")
        unknown(f"action {action}", spec, ACTION_KEYS, "charmcraft.yaml")
        if isinstance(spec, dict) and not isinstance(spec.get("params", {}), dict):
            errors.append(f"charmcraft.yaml: params of action {action} must be a mapping")
    need("charmcraft.yaml", charmcraft, "actions.prepare-removal.description", kind=str)

    # metadata.yaml: only the keys Juju knows, at every level we use (catches typos).
    unknown("the top level", metadata, METADATA_KEYS)
    for section in ("requires", "provides", "peers"):
        for relation, spec in (metadata.get(section) or {}).items():
            unknown(f"{section}.{relation}", spec, RELATION_KEYS)
            if isinstance(spec, dict) and not spec.get("interface"):
                errors.append(f"metadata.yaml: {section}.{relation} has no interface")
    for container, spec in (metadata.get("containers") or {}).items():
        unknown(f"containers.{container}", spec, CONTAINER_KEYS)
    for resource, spec in (metadata.get("resources") or {}).items():
        unknown(f"resources.{resource}", spec, RESOURCE_KEYS)

    # metadata.yaml: identity, container, resource, relations.
    need("metadata.yaml", metadata, "name", "aitenant-k8s")
    for key in ("summary", "description"):
        need("metadata.yaml", metadata, key, kind=str)
    assumes = need("metadata.yaml", metadata, "assumes", kind=list) or []
    for item in ("k8s-api", "juju >= 3.6"):
        if item not in assumes:
            errors.append(f"metadata.yaml: assumes must include {item!r}")
    need("metadata.yaml", metadata, "containers.aitenant-controller.resource", "controller-image")
    need("metadata.yaml", metadata, "resources.controller-image.type", "oci-image")
    for relation, interface in (
        ("gateway", "gateway_metadata"),
        ("maas-api", "maas_api"),
        ("certificates", "tls-certificates"),
    ):
        need("metadata.yaml", metadata, f"requires.{relation}.interface", interface)
        need("metadata.yaml", metadata, f"requires.{relation}.limit", 1)
    for dotted, interface in (
        ("requires.logging", "loki_push_api"),
        ("provides.metrics-endpoint", "prometheus_scrape"),
        ("provides.grafana-dashboard", "grafana_dashboard"),
    ):
        need("metadata.yaml", metadata, f"{dotted}.interface", interface)
        need("metadata.yaml", metadata, f"{dotted}.optional", True)
    need("metadata.yaml", metadata, "peers.aitenant-peers.interface", "aitenant_k8s_peers")

    # rockcraft.yaml: the controller image (rockcraft is not installed here to check it).
    need("rockcraft.yaml", rock, "base", "ubuntu@24.04")
    need("rockcraft.yaml", rock, "run-user", "_daemon_")
    need("rockcraft.yaml", rock, "entrypoint-service", "aitenant-controller")
    command = need("rockcraft.yaml", rock, "services.aitenant-controller.command", kind=str) or ""
    if not command.startswith("aitenant-controller"):
        errors.append("rockcraft.yaml: the service must run aitenant-controller")
    rock_parts = need("rockcraft.yaml", rock, "parts", kind=dict) or {}
    if not any(
        isinstance(p, dict) and p.get("plugin") == "uv" and "controller" in p.get("uv-extras", [])
        for p in rock_parts.values()
    ):
        errors.append("rockcraft.yaml: no uv part installs the controller extra")
    return errors


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else ROOT
    errors = [*charmcraft_errors(root), *our_errors(root)]
    for error in errors:
        print(f"{PREFIX}: {error}", file=sys.stderr)
    if errors:
        return 1
    print(
        f"{PREFIX}: charmcraft.yaml, metadata.yaml and rockcraft.yaml look valid", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
