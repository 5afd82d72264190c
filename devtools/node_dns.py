"""The node's DNS responder (devtools/node.py): answers only
``<service>.<namespace>.svc.cluster.local`` with the Service's ClusterIP, on the node's own
address, and never forwards a query anywhere."""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import struct
import subprocess
from collections.abc import Callable

from devtools.node_config import CLUSTER_DOMAIN


class ServiceDNS(socketserver.ThreadingUDPServer):
    """Answers A queries for ``<service>.<namespace>.svc.cluster.local`` with the Service's
    ClusterIP (read from the API server with kubectl's JSON); every other name is NXDOMAIN.
    It never forwards a query anywhere."""

    daemon_threads = True

    def __init__(self, address: str, kubectl: list[str]) -> None:
        self.kubectl = kubectl
        super().__init__((address, 53), _DNSHandler)

    def cluster_ip(self, name: str) -> str | None:
        suffix = f".svc.{CLUSTER_DOMAIN}"
        if not name.endswith(suffix):
            return None
        parts = name.removesuffix(suffix).split(".")
        if len(parts) != 2:
            return None
        service, namespace = parts
        got = subprocess.run(
            [*self.kubectl, "get", "service", "-n", namespace, service, "-o", "json"],
            capture_output=True,
            text=True,
            check=False,
        )
        if got.returncode != 0:
            return None
        ip = json.loads(got.stdout)["spec"].get("clusterIP")
        return ip if ip and ip != "None" else None


class _DNSHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data, sock = self.request
        server = self.server
        assert isinstance(server, ServiceDNS)
        with contextlib.suppress(Exception):
            sock.sendto(_answer(data, server.cluster_ip), self.client_address)


def _answer(query: bytes, lookup: Callable[[str], str | None]) -> bytes:
    ident, flags = struct.unpack("!HH", query[:4])
    labels, pos = [], 12
    while query[pos]:
        length = query[pos]
        labels.append(query[pos + 1 : pos + 1 + length].decode().lower())
        pos += 1 + length
    qtype = struct.unpack("!H", query[pos + 1 : pos + 3])[0]
    question = query[12 : pos + 5]
    ip = lookup(".".join(labels))
    rd = flags & 0x0100
    if ip is None:
        return struct.pack("!HHHHHH", ident, 0x8400 | rd | 3, 1, 0, 0, 0) + question
    if qtype != 1:  # the name exists, with no record of that type
        return struct.pack("!HHHHHH", ident, 0x8400 | rd, 1, 0, 0, 0) + question
    record = struct.pack("!HHHIH", 0xC00C, 1, 1, 5, 4) + socket.inet_aton(ip)
    return struct.pack("!HHHHHH", ident, 0x8400 | rd, 1, 1, 0, 0) + question + record
