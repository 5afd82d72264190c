"""The workload container: its names, ports and files, and how the charm writes the files.

The controller watches its certificate files and reloads them in place, so the charm writes a
file only when its content differs: an unchanged certificate is never a change for the
controller, and a rotated one never restarts it.
"""

from __future__ import annotations

from typing import Final

import ops

from aitenant import contract
from aitenant_charm import pki
from aitenant_charm.config import CharmConfig
from aitenant_charm.flags import (
    ControllerInputs,
    GatewayFacts,
    Ports,
    WorkloadPaths,
    resolve_gateway,
)
from charms.aitenant_k8s.v0.maas_api import MaasApiAppData

# Workload container and its Pebble service; the container name is in metadata.yaml.
CONTAINER: Final = "aitenant-controller"
SERVICE: Final = "aitenant-controller"
LAYER: Final = "aitenant-controller"
# The webhook listens on 9443 in every unit; Juju's Service for the app exposes it, and the
# webhook configuration calls that Service on the same port.
WEBHOOK_PORT: Final = contract.DEFAULT_WEBHOOK_PORT
# /healthz and /readyz (Pebble checks), and /metrics.
HEALTH_PORT: Final = contract.DEFAULT_HEALTH_PORT
METRICS_PORT: Final = contract.DEFAULT_METRICS_PORT
PORTS: Final = Ports(webhook=WEBHOOK_PORT, health=HEALTH_PORT, metrics=METRICS_PORT)
# Files in the workload. The controller watches the webhook cert dir and reloads on change,
# so a renewed certificate never restarts the process.
WEBHOOK_CERT_DIR: Final = "/etc/aitenant/webhook"
MAAS_API_CA_DIR: Final = "/etc/aitenant/maas-api-ca"
MAAS_API_CA_FILE: Final = f"{MAAS_API_CA_DIR}/ca.crt"
MAAS_API_CA_KEY_FILE: Final = f"{MAAS_API_CA_DIR}/ca.key"
PATHS: Final = WorkloadPaths(
    webhook_cert_dir=WEBHOOK_CERT_DIR,
    maas_api_ca_file=MAAS_API_CA_FILE,
    maas_api_ca_key_file=MAAS_API_CA_KEY_FILE,
)
# rockcraft's `_daemon_` user: the controller image runs as it, and owns its key files.
WORKLOAD_UID: Final = 584792


def controller_inputs(
    config: CharmConfig,
    gateway: GatewayFacts | None,
    maas_api: MaasApiAppData | None,
    *,
    app: str,
) -> ControllerInputs | None:
    """All inputs of the controller's command line, with this container's files and ports;
    None while the gateway (config, else the `gateway` relation's ``gateway``) or the
    `maas-api` relation's data is missing."""
    resolved, _ = resolve_gateway(config, gateway)
    if resolved is None or maas_api is None:
        return None
    return ControllerInputs(
        config=config, app=app, gateway=resolved, maas_api=maas_api, paths=PATHS, ports=PORTS
    )


def write_webhook_files(container: ops.Container, *, cert_pem: str, key_pem: str) -> bool:
    """Write the webhook certificate and key; True when either changed."""
    return any(
        [
            push_if_changed(container, f"{WEBHOOK_CERT_DIR}/tls.crt", cert_pem, 0o644),
            push_if_changed(container, f"{WEBHOOK_CERT_DIR}/tls.key", key_pem, 0o600),
        ]
    )


def write_ca_files(container: ops.Container, ca: pki.KeyPair) -> None:
    """Write the internal CA the controller signs the tenants' maas-api certificates with."""
    push_if_changed(container, MAAS_API_CA_FILE, ca.cert_pem, 0o644)
    push_if_changed(container, MAAS_API_CA_KEY_FILE, ca.key_pem, 0o600)


def push_if_changed(container: ops.Container, path: str, content: str, mode: int) -> bool:
    """Write a file only when its content differs, so watchers see real changes only; True
    when it wrote."""
    try:
        with container.pull(path) as current:
            if current.read() == content:
                return False
    except ops.pebble.PathError:
        pass
    container.push(
        path,
        content,
        make_dirs=True,
        permissions=mode,
        user_id=WORKLOAD_UID,
        group_id=WORKLOAD_UID,
    )
    return True
