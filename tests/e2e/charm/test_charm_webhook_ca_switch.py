"""Webhook CA switches on the deployed charm refuse no admission.

While the charm switches the webhook's CA (internal CA rotation, certificates relation added,
then removed), a task sends AITenant creations through the API server (server-side dry runs:
admission runs, nothing is stored) and counts every refusal; it also records how many CAs
caBundle holds. The deployment is charm_deployment.py's, made by conftest.py's fixture.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from charmlibs.interfaces.tls_certificates import Certificate, CertificateSigningRequest, PrivateKey
from devtools import samples
from lightkube import ApiError, AsyncClient
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from ops import testing

import charm
from aitenant.resources import AITenant
from aitenant_charm import pki
from aitenant_charm.cluster_manifests import cluster_scoped_name
from aitenant_charm.internal_ca import INTERNAL_CA_LABEL
from charm import AITenantCharm

from ..harness import eventually
from .charm_deployment import AITENANT_NS, MODEL, Deployment, bundle_of
from .charm_harness import APP

PROVIDER = "self-signed-certificates"


@dataclass
class Tally:
    """Admissions sent during one switch, and what the API server answered."""

    allowed: int = 0
    refused: list[str] = field(default_factory=list)
    bundle_sizes: set[int] = field(default_factory=set)


class Probe:
    """Sends a dry-run AITenant create every 50 ms and samples the published caBundle."""

    def __init__(self, kube: AsyncClient) -> None:
        self.kube = kube
        self.tally = Tally()
        self._task: asyncio.Task[None] | None = None
        self._count = 0

    async def once(self) -> bool:
        self._count += 1
        body = samples.aitenant(f"probe-{self._count}", AITENANT_NS)
        try:
            await self.kube.create(AITenant.from_dict(body), dry_run=True)
        except ApiError as exc:
            self.tally.refused.append(exc.status.message or str(exc.status.code))
            return False
        self.tally.allowed += 1
        return True

    async def _run(self) -> None:
        name = cluster_scoped_name(APP, MODEL)
        while True:
            await self.once()
            with contextlib.suppress(ApiError):
                vwc = await self.kube.get(ValidatingWebhookConfiguration, name)
                pem = bundle_of(vwc)
                self.tally.bundle_sizes.add(len(pki.split_pem(pem)))
            await asyncio.sleep(0.05)

    def start(self) -> Tally:
        self.tally = Tally()
        self._task = asyncio.create_task(self._run())
        return self.tally

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def switch(
    deployed: Deployment, action: Callable[[], Awaitable[None]], timeout: float = 90
) -> Tally:
    """Count admissions from before ``action`` until the switch has settled."""
    probe = Probe(deployed.kube)
    await eventually(probe.once, timeout=60)  # the webhook answers before we start counting
    before = await deployed.pushed_tls()
    tally = probe.start()
    try:
        await action()
        assert await deployed.pushed_tls() != before, "the action did not switch the certificate"
        await eventually(deployed.settled, timeout=timeout, interval=0.5)
        for _ in range(10):  # a few more admissions against the settled configuration
            await probe.once()
    finally:
        await probe.stop()
    return tally


def report(kind: str, tally: Tally) -> None:
    x509 = sum("x509" in message for message in tally.refused)
    refused = sum("connection refused" in message for message in tally.refused)
    print(
        f"\n{kind}: {tally.allowed} admitted, {len(tally.refused)} refused "
        f"({x509} x509, {refused} connection refused), "
        f"caBundle sizes seen {sorted(tally.bundle_sizes)}"
    )


def provide_certificate(harness: testing.Harness[AITenantCharm], relation_id: int) -> None:
    """The provider's side: sign the unit's CSR with a CA of its own and publish it."""
    now = datetime.datetime.now(datetime.UTC)
    provider_ca = pki.generate_ca("provider CA", now=now)
    requests = harness.get_relation_data(relation_id, harness.model.unit.name)
    csr_pem = json.loads(requests["certificate_signing_requests"])[0]["certificate_signing_request"]
    signed = CertificateSigningRequest.from_string(csr_pem).sign(
        ca=Certificate.from_string(provider_ca.cert_pem),
        ca_private_key=PrivateKey.from_string(provider_ca.key_pem),
        validity=datetime.timedelta(days=30),
    )
    provided = {
        "ca": provider_ca.cert_pem,
        "certificate_signing_request": csr_pem,
        "certificate": str(signed),
        "chain": [str(signed), provider_ca.cert_pem],
    }
    harness.update_relation_data(relation_id, PROVIDER, {"certificates": json.dumps([provided])})


async def test_webhook_ca_switches_refuse_no_admission(deployment: Deployment):
    harness = deployment.harness
    results: dict[str, Tally] = {}

    # 1. Internal CA rotation: the CA is due (a tenth of its life left), update-status
    #    rotates it and re-issues the webhook certificate from the new CA.
    async def rotate() -> None:
        due = pki.generate_ca(
            "due CA",
            now=datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=330),
        )

        def replace() -> None:
            secret = harness.model.get_secret(label=INTERNAL_CA_LABEL)
            secret.set_content({"ca-cert": due.cert_pem, "ca-key": due.key_pem})

        await deployment.hook(replace)
        await deployment.hook(harness.charm.on.update_status.emit)

    results["internal CA rotation"] = await switch(deployment, rotate)

    # 2. The certificates relation is added and the provider issues the certificate.
    relation: dict[str, int] = {}

    async def add_certificates() -> None:
        def relate() -> None:
            relation["id"] = harness.add_relation(charm.CERTIFICATES_RELATION, PROVIDER)
            harness.add_relation_unit(relation["id"], f"{PROVIDER}/0")

        await deployment.hook(relate)
        await deployment.hook(lambda: provide_certificate(harness, relation["id"]))

    results["certificates relation added"] = await switch(deployment, add_certificates)

    # 3. The certificates relation is removed: back to the internal CA's certificate.
    async def remove_certificates() -> None:
        await deployment.hook(lambda: harness.remove_relation(relation["id"]))

    results["certificates relation removed"] = await switch(deployment, remove_certificates)

    for kind, tally in results.items():
        report(kind, tally)
    # THEN no switch refused a single admission, each was measured under load, the old and
    # new CA were published together at some point, and the controller never restarted
    for kind, tally in results.items():
        assert tally.refused == [], (kind, tally.refused[:3])
        assert tally.allowed >= 20, (kind, tally.allowed)
        assert max(tally.bundle_sizes) >= 2, (kind, tally.bundle_sizes)
    assert deployment.controller.restarts == 0
    assert deployment.controller.running
