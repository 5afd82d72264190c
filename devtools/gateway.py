"""A real Gateway API implementation beside the node: Traefik, run on this machine.

Traefik (``tools/traefik``, built by ``scripts/build-gateway.sh``) reads Gateways, HTTPRoutes,
BackendTLSPolicies and what they name from the API server as a ServiceAccount of its own, bound
only to what its Gateway API provider reads and the status of the Gateway API kinds it writes.
It runs as a host process, not a pod: the node routes the pod and Service ranges to its bridge
(devtools/node.py), so Traefik reaches maas-api's pod addresses from here, and nothing it
serves leaves loopback. Each entry point listens on 127.0.0.1 on a free port; a Gateway's
listener names that port to be served there.

Entry points refuse encoded separators and the other encoded characters a path could hide a
``..`` or a NUL behind (docs/platform.md §5.1): with Traefik's defaults
``/v1/api-keys/..%2f..%2finternal/...`` reached maas-api.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import trustme
import yaml

from devtools.cluster import (
    REPO_ROOT,
    built_by,
    cluster_role_with_binding,
    free_port,
    kube_bin_dir,
    terminate_group,
    wait_or_kill_group,
)

BUILD_SCRIPT: Final = REPO_ROOT / "scripts" / "build-gateway.sh"
GATEWAY_CLASS: Final = "aitenant-traefik"
# Traefik's Gateway API controller name (its provider accepts GatewayClasses naming it).
CONTROLLER_NAME: Final = "traefik.io/gateway-controller"
NAMESPACE: Final = "aitenant-traefik"
SERVICE_ACCOUNT: Final = "traefik"
GATEWAY_API_GROUP: Final = "gateway.networking.k8s.io"
# What the Gateway API provider watches (Traefik's own docs list these rights), read only.
READ_CORE: Final = ("namespaces", "services", "secrets", "configmaps")
READ_GATEWAY_API: Final = (
    "gatewayclasses",
    "gateways",
    "httproutes",
    "grpcroutes",
    "referencegrants",
    "backendtlspolicies",
)
# The status Traefik reports, and only of Gateway API kinds: nobody else's status.
STATUS_GATEWAY_API: Final = (
    "gatewayclasses/status",
    "gateways/status",
    "httproutes/status",
    "grpcroutes/status",
    "backendtlspolicies/status",
)
# Every encoded character Traefik can refuse in a path (all allowed by its defaults).
ENCODED_CHARACTERS: Final = (
    "allowEncodedSlash",
    "allowEncodedBackSlash",
    "allowEncodedNullCharacter",
    "allowEncodedSemicolon",
    "allowEncodedPercent",
    "allowEncodedQuestionMark",
    "allowEncodedHash",
)
TOKEN_DURATION: Final = "24h"
START_TIMEOUT: Final = 60.0


@functools.cache
def kubectl_binary() -> str:
    """The kubectl built with the control plane (its version), found once per process."""
    return str(kube_bin_dir() / "kubectl")


def traefik_binary() -> Path:
    return built_by(BUILD_SCRIPT)


def rbac_manifests() -> list[dict[str, Any]]:
    """Traefik's namespace, ServiceAccount, ClusterRole and its binding."""
    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": list(READ_CORE), "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": [GATEWAY_API_GROUP],
            "resources": list(READ_GATEWAY_API),
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": [GATEWAY_API_GROUP],
            "resources": list(STATUS_GATEWAY_API),
            "verbs": ["update"],
        },
    ]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
        },
        *cluster_role_with_binding(
            GATEWAY_CLASS,
            rules,
            {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
        ),
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": GATEWAY_CLASS},
            "spec": {"controllerName": CONTROLLER_NAME},
        },
    ]


def static_config(ports: dict[str, int], access_log: Path, log: Path) -> dict[str, Any]:
    """Traefik's static configuration: our entry points and the Gateway API provider only."""
    refuse = dict.fromkeys(ENCODED_CHARACTERS, False)
    return {
        # No call home: nothing leaves this machine.
        "global": {"checkNewVersion": False, "sendAnonymousUsage": False},
        "entryPoints": {
            name: {
                "address": f"127.0.0.1:{port}",
                "http": {"encodedCharacters": refuse, "sanitizePath": True},
            }
            for name, port in ports.items()
        },
        "providers": {"kubernetesGateway": {"throttleDuration": "100ms"}},
        "accessLog": {"filePath": str(access_log), "format": "json"},
        "log": {"filePath": str(log), "level": "INFO"},
    }


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def tenant(self) -> str | None:
        """The tenant whose maas-api stand-in answered (none: maas-api did not)."""
        return self.headers.get("x-standin-tenant")


@dataclass
class TraefikGateway:
    """Traefik for the cluster ``kubeconfig`` (an admin's) points at, with one entry point per
    name of ``entry_points``; its files (configuration, logs) under ``workdir``/traefik."""

    kubeconfig: Path
    workdir: Path
    entry_points: tuple[str, ...] = ("web",)
    ports: dict[str, int] = field(default_factory=dict)
    ca: trustme.CA = field(default_factory=trustme.CA)
    _proc: subprocess.Popen[bytes] | None = None

    @property
    def work(self) -> Path:
        return self.workdir / "traefik"

    @property
    def access_log(self) -> Path:
        return self.work / "access.log"

    @property
    def log(self) -> Path:
        return self.work / "traefik.log"

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        return subprocess.run(
            [kubectl_binary(), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def start(self) -> None:
        binary = traefik_binary()
        self.work.mkdir(parents=True, exist_ok=True)
        self.kubectl(
            "apply",
            "-f",
            "-",
            stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": rbac_manifests()}),
        )
        self.ports = {name: free_port() for name in self.entry_points}
        config = self.work / "traefik.yaml"
        config.write_text(yaml.safe_dump(static_config(self.ports, self.access_log, self.log)))
        kubeconfig = self._write_kubeconfig()
        with (self.work / "stdout.log").open("ab") as out:
            self._proc = subprocess.Popen(
                [str(binary), f"--configFile={config}"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin"},
                start_new_session=True,
            )
        try:
            self._wait_accepted(time.monotonic() + START_TIMEOUT)
        except BaseException:
            self.stop()
            raise

    def _write_kubeconfig(self) -> Path:
        admin = yaml.safe_load(self.kubeconfig.read_text())["clusters"][0]["cluster"]
        token = self.kubectl(
            "create", "token", SERVICE_ACCOUNT, "-n", NAMESPACE, f"--duration={TOKEN_DURATION}"
        ).strip()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    # The admin's server and its trust; our ServiceAccount's token.
                    "cluster": admin,
                }
            ],
            "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
            "contexts": [
                {"name": "traefik", "context": {"cluster": "local", "user": SERVICE_ACCOUNT}}
            ],
            "current-context": "traefik",
        }
        path = self.work / "kubeconfig"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def _wait_accepted(self, deadline: float) -> None:
        """Until Traefik accepted our GatewayClass (its status is Traefik's own write)."""
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"traefik exited with {self._proc.returncode}: see {self.log}")
            got = json.loads(self.kubectl("get", "gatewayclass", GATEWAY_CLASS, "-o", "json"))
            conditions = (got.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Accepted" and c["status"] == "True" for c in conditions):
                return
            time.sleep(0.2)
        raise RuntimeError(f"traefik did not accept GatewayClass {GATEWAY_CLASS}: see {self.log}")

    def stop(self) -> None:
        if self._proc is not None:
            terminate_group(self._proc)
            wait_or_kill_group(self._proc, 10)
            self._proc = None

    # -- Gateways ----------------------------------------------------------------------------
    def serving_secret(self, name: str, namespace: str, hostname: str) -> dict[str, Any]:
        """A TLS Secret for a listener's ``hostname``, issued by our CA (``self.ca``)."""
        cert = self.ca.issue_cert(hostname)
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": namespace},
            "stringData": {
                "tls.crt": b"".join(b.bytes() for b in cert.cert_chain_pems).decode(),
                "tls.key": cert.private_key_pem.bytes().decode(),
            },
        }

    def gateway(
        self,
        name: str,
        namespace: str,
        *,
        entry_point: str,
        hostname: str,
        secret: str,
        selector: dict[str, str],
    ) -> dict[str, Any]:
        """A Gateway of our class served on ``entry_point``, for ``hostname`` over TLS, admitting
        routes from namespaces labelled ``selector``."""
        return {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "gatewayClassName": GATEWAY_CLASS,
                "listeners": [
                    {
                        "name": "https",
                        "protocol": "HTTPS",
                        "port": self.ports[entry_point],
                        "hostname": hostname,
                        "tls": {"mode": "Terminate", "certificateRefs": [{"name": secret}]},
                        "allowedRoutes": {
                            "namespaces": {
                                "from": "Selector",
                                "selector": {"matchLabels": selector},
                            }
                        },
                    }
                ],
            },
        }

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context

    async def request(
        self,
        entry_point: str,
        hostname: str,
        target: str,
        *,
        method: str = "GET",
        timeout: float = 5.0,
        verify: bool = True,
    ) -> Response:
        """One HTTP/1.1 request through ``entry_point`` with ``target`` sent as written (no
        client library's cleaning of ``//``, ``/./`` or ``%2e``), SNI and Host ``hostname``."""
        context = self.client_context()
        if not verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return await asyncio.wait_for(
            _exchange(self.ports[entry_point], hostname, method, target, context), timeout
        )

    def access_entries(self) -> list[dict[str, Any]]:
        if not self.access_log.exists():
            return []
        return [json.loads(line) for line in self.access_log.read_text().splitlines() if line]


async def _exchange(
    port: int, hostname: str, method: str, target: str, context: ssl.SSLContext
) -> Response:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=hostname
    )
    try:
        head = f"{method} {target} HTTP/1.1\r\nHost: {hostname}\r\nConnection: close\r\n\r\n"
        writer.write(head.encode())
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
    return parse_response(raw)


def parse_response(raw: bytes) -> Response:
    """An HTTP/1.1 response read to the connection's end (Connection: close)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = _unchunk(body)
    return Response(status, headers, body)


def _unchunk(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return out
