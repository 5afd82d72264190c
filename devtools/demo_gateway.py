"""The demo's Gateway on the node: Traefik (devtools/gateway.py) serving the sample tenant's
Gateway on a loopback port, and a ``curl`` through it that the demo runs and prints."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Final

from lightkube import AsyncClient

from devtools import samples
from devtools.gateway import Response, TraefikGateway

ENTRY_POINT: Final = "websecure"
HOSTNAME_SUFFIX: Final = ".gateway.test"
# A Gateway that admits routes by namespace label: the controller puts it on the infra
# namespace (docs/platform.md §5).
SELECTOR: Final = {"aitenant.demo/gateway": "routes"}
PATH: Final = "/maas-api/health"
# Traefik reads the new route and its backend within a second; a busy node may take longer.
ANSWER_TIMEOUT: Final = 30.0


def start(kubeconfig: Path, workdir: Path) -> TraefikGateway:
    print("Starting the Gateway (Traefik, on 127.0.0.1)...")
    began = time.monotonic()
    traefik = TraefikGateway(kubeconfig, workdir, (ENTRY_POINT,))
    traefik.start()
    print(f"Gateway up in {time.monotonic() - began:.1f}s (Traefik's log: {traefik.log})")
    return traefik


def hostname(tenant: str) -> str:
    return tenant + HOSTNAME_SUFFIX


async def create_gateway(client: AsyncClient, traefik: TraefikGateway, name: str, ns: str) -> None:
    """Gateway ``name`` of Traefik's class, with a serving certificate from Traefik's CA."""
    secret = f"{name}-gateway-tls"
    body = traefik.serving_secret(secret, ns, hostname(name))
    await asyncio.to_thread(traefik.kubectl, "apply", "-f", "-", stdin=json.dumps(body))
    gateway = traefik.gateway(
        name,
        ns,
        entry_point=ENTRY_POINT,
        hostname=hostname(name),
        secret=secret,
        selector=SELECTOR,
    )
    await samples.create_gateway(client, gateway)


def curl_command(traefik: TraefikGateway, tenant: str) -> list[str]:
    host, port = hostname(tenant), traefik.ports[ENTRY_POINT]
    ca = traefik.work / "gateway-ca.crt"
    traefik.ca.cert_pem.write_to_path(str(ca))
    return [
        "curl",
        "-sS",
        "--cacert",
        str(ca),
        "--resolve",
        f"{host}:{port}:127.0.0.1",
        f"https://{host}:{port}{PATH}",
    ]


async def wait_answer(traefik: TraefikGateway, tenant: str) -> Response | None:
    deadline = time.monotonic() + ANSWER_TIMEOUT
    response: Response | None = None
    while time.monotonic() < deadline:
        try:
            response = await traefik.request(ENTRY_POINT, hostname(tenant), PATH)
        except OSError:
            response = None
        if response is not None and response.status == 200:
            return response
        await asyncio.sleep(0.2)
    return response


async def show(traefik: TraefikGateway, tenant: str) -> bool:
    """Print and run a ``curl`` to the tenant's maas-api through its Gateway; True when it
    answered 200."""
    answer = await wait_answer(traefik, tenant)
    command = curl_command(traefik, tenant)
    print(f"\nmaas-api through the tenant's Gateway:\n  {' '.join(command)}")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    print(f"  {done.stdout.strip() or done.stderr.strip()}")
    return answer is not None and answer.status == 200 and done.returncode == 0
