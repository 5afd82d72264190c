#!/usr/bin/env bash
# Validate charmcraft.yaml + metadata.yaml (and rockcraft.yaml) before packing.
#
# Two checks, both always run when available:
# - `charmcraft expand-extensions` (when charmcraft is installed) loads charmcraft.yaml through
#   charmcraft's project model; it does not look inside metadata.yaml.
# - our own check (always): parses the three files, refuses unknown keys in metadata.yaml
#   (a typo such as `interfce:` or `requirs:` fails) and verifies the keys the charm code
#   relies on: container, resource, relations, actions, config options and their types.
#
#   scripts/check-charm-metadata.sh            # from anywhere inside the repository
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { echo "check-charm-metadata: $*" >&2; }

if [[ -n "${PYTHON:-}" ]]; then
    read -r -a PY <<<"$PYTHON"
elif command -v uv >/dev/null 2>&1 && [[ -f uv.lock ]]; then
    PY=(uv run --frozen --quiet python)
else
    PY=(python3)
fi

charmcraft_cmd=()
if command -v charmcraft >/dev/null 2>&1; then
    charmcraft_cmd=(charmcraft)
elif "${PY[@]}" -c "import charmcraft" >/dev/null 2>&1; then
    charmcraft_cmd=("${PY[@]}" -m charmcraft)
fi

if ((${#charmcraft_cmd[@]})); then
    log "validating with ${charmcraft_cmd[*]} expand-extensions"
    "${charmcraft_cmd[@]}" expand-extensions >/dev/null
    log "charmcraft accepted charmcraft.yaml"
fi

log "checking charmcraft.yaml, metadata.yaml and rockcraft.yaml with Python"
exec "${PY[@]}" - <<'PYTHON'
import sys
from pathlib import Path

import yaml

errors: list[str] = []


def load(name: str) -> dict:
    path = Path(name)
    if not path.is_file():
        errors.append(f"{name}: missing")
        return {}
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        errors.append(f"{name}: not valid YAML: {exc}")
        return {}
    if not isinstance(data, dict):
        errors.append(f"{name}: top level must be a mapping")
        return {}
    return data


def need(name: str, data: dict, dotted: str, expected=None, kind=None):
    node = data
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


charmcraft = load("charmcraft.yaml")
metadata = load("metadata.yaml")
rock = load("rockcraft.yaml")

# charmcraft.yaml: build and config only; identity lives in metadata.yaml.
need("charmcraft.yaml", charmcraft, "type", "charm")
need("charmcraft.yaml", charmcraft, "base", "ubuntu@24.04")
platforms = need("charmcraft.yaml", charmcraft, "platforms", kind=dict)
if isinstance(platforms, dict) and "amd64" not in platforms:
    errors.append("charmcraft.yaml: platforms must include amd64")
parts = need("charmcraft.yaml", charmcraft, "parts", kind=dict) or {}
if not any(isinstance(p, dict) and p.get("plugin") == "uv" for p in parts.values()):
    errors.append("charmcraft.yaml: no part uses the uv plugin")
for key in ("name", "summary", "description", "containers", "requires", "resources"):
    if key in charmcraft:
        errors.append(f"charmcraft.yaml: {key} belongs in metadata.yaml")
options = need("charmcraft.yaml", charmcraft, "config.options", kind=dict) or {}
expected_options = {
    "aitenant-namespace": ("string", "ai-tenants"),
    "enable-tenant-namespace-discovery": ("boolean", True),
    "gateway-namespace": ("string", ""),
    "gateway-name": ("string", ""),
    "infra-namespace": ("string", ""),
    "maas-subscription-namespace": ("string", "models-as-a-service"),
    "deletion-timeout": ("string", "10m"),
    "manage-default-tenant": ("boolean", True),
    "authorino-namespaces": ("string", "kuadrant-system,openshift-operators,rh-connectivity-link"),
    "log-level": ("string", "info"),
}
for option, (kind, default) in expected_options.items():
    spec = options.get(option)
    if not isinstance(spec, dict):
        errors.append(f"charmcraft.yaml: config option {option} missing")
        continue
    if spec.get("type") != kind:
        errors.append(f"charmcraft.yaml: {option} type {spec.get('type')!r}, expected {kind!r}")
    if spec.get("default") != default:
        errors.append(f"charmcraft.yaml: {option} default {spec.get('default')!r}, expected {default!r}")
    if not spec.get("description"):
        errors.append(f"charmcraft.yaml: {option} has no description")
for option in set(options) - set(expected_options):
    errors.append(f"charmcraft.yaml: unexpected config option {option}")

# metadata.yaml: only the keys Juju knows, at every level we use (catches typos).
METADATA_KEYS = {
    "name", "display-name", "summary", "description", "website", "source", "issues",
    "docs", "contact", "maintainers", "terms", "assumes", "containers", "resources",
    "requires", "provides", "peers", "storage", "devices", "extra-bindings", "subordinate",
    "charm-user",
}
RELATION_KEYS = {"interface", "limit", "optional", "scope", "description"}
CONTAINER_KEYS = {"resource", "mounts", "bases", "uid", "gid"}
RESOURCE_KEYS = {"type", "description", "filename", "upstream-source"}


def unknown(where: str, mapping: object, allowed: set[str]) -> None:
    if not isinstance(mapping, dict):
        errors.append(f"metadata.yaml: {where} must be a mapping")
        return
    for key in sorted(set(mapping) - allowed):
        errors.append(f"metadata.yaml: unknown key {key!r} in {where}")


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

# charmcraft.yaml: known top-level keys and option fields (charmcraft checks more when present).
CHARMCRAFT_KEYS = {
    "type", "base", "bases", "build-base", "platforms", "parts", "config", "actions",
    "charm-libs", "charmhub", "links", "title", "license", "analysis", "extensions",
}
for key in sorted(set(charmcraft) - CHARMCRAFT_KEYS - {"name", "summary", "description",
                                                        "containers", "requires", "resources"}):
    errors.append(f"charmcraft.yaml: unknown key {key!r} at the top level")
for option, spec in options.items():
    if isinstance(spec, dict):
        for key in sorted(set(spec) - {"type", "default", "description"}):
            errors.append(f"charmcraft.yaml: unknown key {key!r} in config option {option}")

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

# charmcraft.yaml: the teardown action.
need("charmcraft.yaml", charmcraft, "actions.prepare-removal.description", kind=str)

# rockcraft.yaml: the controller image.
need("rockcraft.yaml", rock, "base", "ubuntu@24.04")
need("rockcraft.yaml", rock, "run-user", "_daemon_")
need("rockcraft.yaml", rock, "entrypoint-service", "aitenant-controller")
command = need("rockcraft.yaml", rock, "services.aitenant-controller.command", kind=str) or ""
if not command.startswith("aitenant-controller"):
    errors.append("rockcraft.yaml: the service must run aitenant-controller")
rock_parts = need("rockcraft.yaml", rock, "parts", kind=dict) or {}
if not any(isinstance(p, dict) and p.get("plugin") == "uv" for p in rock_parts.values()):
    errors.append("rockcraft.yaml: no part uses the uv plugin")

for error in errors:
    print(f"check-charm-metadata: {error}", file=sys.stderr)
if errors:
    sys.exit(1)
print("check-charm-metadata: charmcraft.yaml, metadata.yaml and rockcraft.yaml look valid",
      file=sys.stderr)
PYTHON
