"""Requests through a real Gateway (Traefik, devtools/gateway.py), the way a tenant's users
reach maas-api: what the objects we render do once a Gateway implementation reads them.

Each test logs how many requests it sent through the Gateway and how many failed. With the
real maas-api (``AITENANT_MAAS_API_IMAGE``) the stand-in's headers and request record are
missing: the tests then judge by status and by Traefik's access log alone.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pytest
import trustme
from cryptography import x509
from devtools import images, samples
from devtools.gateway import CONTROLLER_NAME, Response
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from aitenant.platform import kinds, routes
from aitenant.resources import AITenant, Gateway

from ..controller.maas_api_pods import (
    POD_READY_TIMEOUT,
    call_pod,
    delete_tenant,
    maas_api_pods,
    pod_ready,
)
from ..harness import AITENANT_NS, GATEWAY_NS, INFRA_NS, eventually
from ..tenants import get_tenant
from .conftest import SITE_A, SITE_B, GatewayRun, Site

pytestmark = pytest.mark.e2e
log = logging.getLogger(__name__)

STANDIN = not images.runs_real_maas_api()
# The stand-in records every request; this one is read from its pod, never through a Gateway.
REQUESTS_PATH = "/standin/v1/requests"
# Long enough for a Gateway to notice a change of the objects it reads (Traefik throttles to
# 100 ms here) and for a pod rollout on a busy node.
GATEWAY_SETTLE = 30.0


@dataclass
class Tally:
    """Requests one test sent through the Gateway, and those that failed."""

    test: str
    sent: int = 0
    failures: list[str] = field(default_factory=list)
    # Sent while waiting for the Gateway to pick up a change (their answers judged nothing).
    waited: int = 0

    def note(self, ok: bool, what: str) -> None:
        self.sent += 1
        if not ok:
            self.failures.append(what)

    def report(self) -> None:
        log.warning(
            "%s: %d requests through the Gateway, %d failed (and %d sent while waiting for "
            "the Gateway to pick up a change)",
            self.test,
            self.sent,
            len(self.failures),
            self.waited,
        )


async def send(run: GatewayRun, site: Site, target: str, **options: Any) -> Response:
    return await run.traefik.request(site.entry_point, site.hostname, target, **options)


def answered_by(response: Response, site: Site) -> bool:
    """A 200 from ``site``'s tenant's maas-api (with the real one: a 200 at all)."""
    if response.status != 200:
        return False
    return not STANDIN or response.tenant == site.tenant


async def answers(
    run: GatewayRun, site: Site, tally: Tally, target: str = "/v1/models"
) -> Response:
    """The first answer from ``site``'s tenant to ``target``, once the Gateway gives one."""

    async def check() -> Response | None:
        tally.waited += 1
        response = await send(run, site, target)
        return response if answered_by(response, site) else None

    response = await eventually(check, timeout=GATEWAY_SETTLE, interval=0.2)
    tally.waited -= 1
    tally.note(True, target)
    return response


async def recorded_requests(
    kube: AsyncClient, run: GatewayRun, tenant: str
) -> list[dict[str, str]]:
    """What every pod of ``tenant``'s maas-api stand-in received."""
    found: list[dict[str, str]] = []
    for pod in await maas_api_pods(kube, tenant, include_terminating=False):
        got = await call_pod(pod, run.ca_file, "GET", REQUESTS_PATH)
        assert got.status_code == 200, got.text
        found.extend(got.json())
    return found


def parent_status(route: dict[str, Any], gateway: str) -> dict[str, str]:
    """The route's conditions as Traefik reported them for ``gateway``: type -> status."""
    for parent in (route.get("status") or {}).get("parents") or []:
        if parent["parentRef"]["name"] == gateway and parent["controllerName"] == CONTROLLER_NAME:
            return {c["type"]: c["status"] for c in parent.get("conditions") or []}
    return {}


async def test_each_tenant_is_routed_on_its_own_gateway_only(
    kube: AsyncClient, gateway_run: GatewayRun
) -> None:
    tally = Tally("own-gateway-only")
    infra = await kube.get(Namespace, INFRA_NS)
    assert infra.metadata is not None
    for site in (SITE_A, SITE_B):
        # The listener admits routes by namespace label: the controller copied it.
        assert site.selector.items() <= (infra.metadata.labels or {}).items()

        async def accepted(site: Site = site) -> dict[str, str] | None:
            route = await kube.get(
                kinds.HTTP_ROUTE.resource, f"maas-api-route-{site.tenant}", namespace=INFRA_NS
            )
            conditions = parent_status(dict(route), site.tenant)
            ok = conditions.get("Accepted") == "True" and conditions.get("ResolvedRefs") == "True"
            return conditions if ok else None

        await eventually(accepted, timeout=GATEWAY_SETTLE, interval=0.2)
        response = await answers(gateway_run, site, tally)
        assert response.status == 200
        assert b'"object"' in response.body or not STANDIN

    # Each Gateway's port asked for the other's hostname: no route there, no tenant answers.
    # (The certificate is not checked: Traefik may offer the other Gateway's, or its own.)
    for here, there in ((SITE_A, SITE_B), (SITE_B, SITE_A)):
        crossed = await gateway_run.traefik.request(
            here.entry_point, there.hostname, "/v1/models", verify=False
        )
        ok = crossed.status == 404 and crossed.tenant is None
        tally.note(ok, f"{here.entry_point} as {there.hostname}: {crossed.status}")
    tally.report()
    assert tally.failures == []


async def test_public_paths_answer_over_tls_the_gateway_verifies(
    kube: AsyncClient, gateway_run: GatewayRun
) -> None:
    tally = Tally("backend-tls")
    site = SITE_A
    policy = await kube.get(
        kinds.BACKEND_TLS_POLICY.resource, f"maas-api-{site.tenant}", namespace=INFRA_NS
    )
    ancestors = (dict(policy).get("status") or {}).get("ancestors") or []
    assert any(a["controllerName"] == CONTROLLER_NAME for a in ancestors), ancestors
    for target in ("/maas-api/health", "/v1/models", "/maas-api/v1/models"):
        await answers(gateway_run, site, tally, target)

    # A CA that did not sign maas-api's certificate, with the controller stopped so it stays:
    # the Gateway refuses the backend, and says so with a 5xx of its own.
    bundle = f"maas-api-{site.tenant}-backend-ca"
    await gateway_run.controller.stop()
    try:
        wrong = trustme.CA().cert_pem.bytes().decode()
        await kube.patch(
            kinds.CONFIG_MAP.resource,
            bundle,
            {"data": {"ca.crt": wrong}},
            namespace=INFRA_NS,
            patch_type=PatchType.MERGE,
        )

        async def refused() -> Response | None:
            # Until the Gateway reads the wrong CA, maas-api still answers: not judged.
            tally.waited += 1
            response = await send(gateway_run, site, "/v1/models")
            return response if response.status >= 500 and response.tenant is None else None

        refusal = await eventually(refused, timeout=GATEWAY_SETTLE, interval=0.2)
        tally.waited -= 1
        tally.note(True, "wrong CA refused")
        log.warning("with a wrong CA the Gateway answered %d", refusal.status)
        for _ in range(5):  # and goes on refusing
            response = await send(gateway_run, site, "/v1/models")
            tally.note(response.status >= 500 and response.tenant is None, f"{response.status}")
        # The other tenant's backend is untouched.
        tally.note(answered_by(await send(gateway_run, SITE_B, "/v1/models"), SITE_B), "other")
    finally:
        await gateway_run.controller.start()

    # The controller puts its CA back, and the same request answers again.
    await answers(gateway_run, site, tally)
    configmap = await kube.get(kinds.CONFIG_MAP.resource, bundle, namespace=INFRA_NS)
    assert configmap["data"]["ca.crt"].strip() == gateway_run.ca_file.read_text().strip()
    tally.report()
    assert tally.failures == []


def internal_spellings(tenant: str) -> list[tuple[str, str]]:
    """(method, target) for every spelling of maas-api's internal endpoints we try."""
    revoke = f"internal/v1/tenants/{tenant}/api-keys"
    cleanup = "internal/v1/api-keys/cleanup"
    select = "internal/v1/subscriptions/select"
    return [
        ("DELETE", f"/maas-api/{revoke}"),
        ("DELETE", f"/{revoke}"),
        ("DELETE", f"//{revoke}"),
        ("DELETE", f"/maas-api//{revoke}"),
        ("DELETE", f"/./{revoke}"),
        ("DELETE", f"/maas-api/./{revoke}"),
        ("DELETE", f"/v1/../{revoke}"),
        ("DELETE", f"/v1/models/../../{revoke}"),
        ("DELETE", f"/v1/api-keys/../../{revoke}"),
        ("DELETE", f"/v1/api-keys/x/../../../{revoke}"),
        ("DELETE", f"/maas-api/v1/../{revoke}"),
        ("DELETE", f"/maas-api/v1/../../{revoke}"),
        ("DELETE", f"/maas-api/v1/api-keys/../../{revoke}"),
        ("DELETE", f"/maas-api/v1/api-keys/../../../{revoke}"),
        ("DELETE", f"/v1/api-keys/%2e%2e/%2e%2e/{revoke}"),
        ("DELETE", f"/v1/api-keys/.%2e/.%2e/{revoke}"),
        ("DELETE", f"/v1/api-keys/..%2f..%2f{revoke}"),
        ("DELETE", f"/v1/api-keys/%2e%2e%2f%2e%2e%2f{revoke}"),
        ("DELETE", f"/v1/api-keys%2f..%2f..%2f{revoke}"),
        ("DELETE", f"/maas-api/v1/api-keys/..%2f..%2f..%2f{revoke}"),
        ("DELETE", f"/v1/api-keys/..%5c..%5c{revoke}"),
        ("DELETE", f"/v1/api-keys/..;/..;/{revoke}"),
        ("DELETE", f"/v1/api-keys/%00/../../{revoke}"),
        ("DELETE", f"/v1/api-keys/%252e%252e/%252e%252e/{revoke}"),
        ("DELETE", "/%69" + revoke[1:]),
        ("DELETE", "/maas-api/%69" + revoke[1:]),
        ("DELETE", f"/v1/api-keys/../../{revoke}".replace("internal", "INTERNAL")),
        ("POST", f"/v1/api-keys/../../{cleanup}"),
        ("POST", f"/v1/model/x/../../../{cleanup}"),
        ("POST", f"/maas-api/v1/model/..%2f..%2f..%2f{cleanup}"),
        ("POST", f"/v1/subscriptions/../../{select}"),
        ("POST", f"/maas-api/{select}"),
        ("DELETE", f"https://a.gateway.test/{revoke}"),
        ("DELETE", f"https://a.gateway.test/v1/api-keys/../../{revoke}"),
    ]


def under_a_public_path(target: str) -> bool:
    """Whether maas-api's router, which matches the path as it arrives (no cleaning of dot
    segments: src/aitenant/platform/routes.py), sees ``target`` under one of the public paths
    the route serves (``/maas-api`` removed, as the route's rewrite does)."""
    path = target.split("?", 1)[0].removeprefix(routes.API_PREFIX)
    if any(segment in (".", "..") for segment in path.split("/")):
        return False
    return any(
        path == p.path or (p.match == "PathPrefix" and path.startswith(p.path + "/"))
        for p in routes.PUBLIC_PATHS
    )


async def test_no_spelling_of_an_internal_path_reaches_an_internal_endpoint(
    kube: AsyncClient, gateway_run: GatewayRun
) -> None:
    """Every spelling is refused (400) or not found (404) at the Gateway, or, where the
    Gateway forwards it, reaches maas-api under a public path, never an internal one."""
    tally = Tally("internal-paths")
    site = SITE_A
    marker = f"probe-{secrets.token_hex(6)}"
    # A public request with the marker reaches maas-api and its record: the record works.
    control = await send(gateway_run, site, f"/v1/models?{marker}=control")
    assert answered_by(control, site), control
    statuses: dict[int, int] = {}
    reached: list[str] = []
    for number, (method, target) in enumerate(internal_spellings(site.tenant)):
        response = await send(gateway_run, site, f"{target}?{marker}={number}", method=method)
        statuses[response.status] = statuses.get(response.status, 0) + 1
        if response.tenant is not None:
            reached.append(target)
        tally.note(not 200 <= response.status < 300, f"{method} {target}: {response.status}")
    log.warning("internal spellings answered %s; reached maas-api: %s", statuses, reached)

    # Traefik's own account: each request it sent to a service was under a public path.
    await asyncio.sleep(0.5)  # the access log is written as each request ends
    routed = [
        e["RequestPath"]
        for e in gateway_run.traefik.access_entries()
        if marker in e.get("RequestPath", "") and e.get("ServiceURL")
    ]
    assert f"/v1/models?{marker}=control" in routed
    for path in routed:
        tally.note(under_a_public_path(path), f"routed by the Gateway: {path}")
    if STANDIN:
        received = await recorded_requests(kube, gateway_run, site.tenant)
        forwarded = [r["path"] for r in received if r["forwardedFor"] and marker in r["path"]]
        assert f"/v1/models?{marker}=control" in forwarded
        for path in forwarded:
            tally.note(under_a_public_path(path), f"maas-api received {path}")
        # Nothing the Gateway forwarded, marked or not, named an internal path.
        assert not [
            r
            for r in received
            if r["forwardedFor"] and unquote(r["path"]).lower().startswith("/internal")
        ]
    tally.report()
    assert tally.failures == []


async def rotate_ca(run: GatewayRun) -> x509.Certificate:
    """What the charm does when it rotates maas-api's CA: new files, the controller restarted."""
    await run.controller.stop()
    samples.write_ca(run.ca_file.parent)
    await run.controller.start()
    return x509.load_pem_x509_certificate(run.ca_file.read_bytes())


async def rolled(kube: AsyncClient, site: Site, before: set[str], new_ca: x509.Certificate) -> bool:
    """``site``'s pods are all new and Ready, none of ``before`` is left, the Gateway trusts
    the new CA only, and the tenant is Active."""
    pods = await maas_api_pods(kube, site.tenant)
    names = {p["metadata"]["name"] for p in pods}
    if names & before or not pods or not all(pod_ready(p) for p in pods):
        return False
    bundle = await kube.get(
        kinds.CONFIG_MAP.resource, f"maas-api-{site.tenant}-backend-ca", namespace=INFRA_NS
    )
    trusted = x509.load_pem_x509_certificates(bundle["data"]["ca.crt"].encode())
    tenant = await get_tenant(kube, site.tenant)
    return trusted == [new_ca] and (tenant.get("status") or {}).get("phase") == "Active"


async def test_a_certificate_rotation_keeps_requests_answered(
    kube: AsyncClient, gateway_run: GatewayRun
) -> None:
    tally = Tally("rotation")
    sites = (SITE_A, SITE_B)
    for site in sites:
        await answers(gateway_run, site, tally)
    before = {
        site.tenant: {p["metadata"]["name"] for p in await maas_api_pods(kube, site.tenant)}
        for site in sites
    }
    stop = asyncio.Event()

    async def stream(site: Site) -> None:
        for number in itertools.count():
            if stop.is_set():
                return
            began = time.monotonic()
            try:
                response = await send(gateway_run, site, f"/v1/models?n={number}")
                tally.note(
                    answered_by(response, site), f"{site.tenant} #{number}: {response.status}"
                )
            except (TimeoutError, OSError) as exc:
                tally.note(False, f"{site.tenant} #{number}: {exc!r}")
            await asyncio.sleep(max(0.0, 0.2 - (time.monotonic() - began)))

    streams = [asyncio.create_task(stream(site)) for site in sites]
    try:
        new_ca = await rotate_ca(gateway_run)
        for site in sites:

            async def done(site: Site = site) -> bool:
                return await rolled(kube, site, before[site.tenant], new_ca)

            await eventually(done, timeout=2 * POD_READY_TIMEOUT, interval=0.5)
        await asyncio.sleep(3)  # and a little after the last pod went
    finally:
        stop.set()
        await asyncio.gather(*streams)
    tally.report()
    assert tally.sent > 20
    assert tally.failures == []


async def test_deleting_a_tenant_stops_its_path_and_the_other_answers(
    kube: AsyncClient, gateway_run: GatewayRun
) -> None:
    tally = Tally("deletion")
    for site in (SITE_A, SITE_B):
        await answers(gateway_run, site, tally)
    await delete_tenant(kube, SITE_B.tenant)

    async def not_found() -> Response | None:
        tally.waited += 1
        response = await send(gateway_run, SITE_B, "/v1/models")
        return response if response.status == 404 else None

    gone = await eventually(not_found, timeout=GATEWAY_SETTLE, interval=0.2)
    tally.waited -= 1
    tally.note(gone.tenant is None, "deleted tenant's path")
    # Its Gateway is still there; its route is not.
    await kube.get(Gateway, SITE_B.tenant, namespace=GATEWAY_NS)
    for _ in range(10):
        response = await send(gateway_run, SITE_A, "/v1/models")
        tally.note(answered_by(response, SITE_A), f"other: {response.status}")
        response = await send(gateway_run, SITE_B, "/v1/models")
        tally.note(response.status == 404, f"deleted: {response.status}")
    names = [
        t.metadata.name async for t in kube.list(AITenant, namespace=AITENANT_NS) if t.metadata
    ]
    assert SITE_B.tenant not in names
    tally.report()
    assert tally.failures == []
