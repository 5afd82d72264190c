"""Chaos scenarios: many tenants created and deleted while the controller is killed, the API
misbehaves, or maas-api is down; then every tenant and every object it owned is checked.

Used by the short e2e variants (tests/e2e/test_chaos.py) and the long ones
(benchmarks/chaos.py). The controller runs as a real process so it can be SIGKILLed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import ConfigMap, Namespace
from lightkube.resources.rbac_authorization_v1 import Role

from aitenant import contract
from aitenant.resources import AITenant, MaasTenantConfig
from devtools import bench, images, samples
from devtools.maas_api import FakeMaasApi


@dataclass
class ControllerProcess:
    """``python -m aitenant`` with the given kubeconfig and flags; restartable, killable."""

    kubeconfig: Path
    log: Path
    args: Sequence[str] = ()
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "aitenant",
                    "--kubeconfig",
                    str(self.kubeconfig),
                    *self.args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **bench.controller_env(), **self.env},
            )
        self.starts += 1

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def peak_rss_mb(self) -> float:
        """High-water mark of the process's resident memory (VmHWM)."""
        assert self.proc is not None
        return bench.peak_rss_mb(self.proc.pid)


def controller_args(
    *,
    gateway_ns: str,
    infra_ns: str,
    maas_api: FakeMaasApi | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """Flags for a test controller: HTTP servers off unless ``extra`` turns them on."""
    args = [
        "--gateway-namespace", gateway_ns,
        "--controller-namespace", infra_ns,
        "--enable-tenant-namespace-discovery",
        "--manage-default-tenant=false",
        "--webhook-port=0", "--metrics-port=0", "--health-port=0",
        "--bind-address=127.0.0.1",
        "--log-level=info",
        *images.controller_flags(),
    ]  # fmt: skip
    if maas_api is not None:
        args += [
            f"--maas-api-url-template={maas_api.url_template}",
            f"--maas-api-ca-file={maas_api.ca_file}",
            f"--maas-api-ca-key-file={maas_api.ca_key_file}",
        ]
    return [*args, *extra]  # later flags win


@dataclass
class Report:
    name: str
    tenants: int
    faults: dict[str, int]
    restarts: int
    create_seconds: float
    delete_seconds: float
    leftovers: list[str]
    revocation_calls: int
    repeat_revocations: int
    repeats_that_revoked_keys: int

    def line(self) -> str:
        faults = ", ".join(f"{k}: {v}" for k, v in sorted(self.faults.items())) or "none"
        return (
            f"{self.name}: {self.tenants} tenants; faults injected: {faults}; controller "
            f"restarts: {self.restarts}; all Active in {self.create_seconds:.1f} s; all deleted "
            f"in {self.delete_seconds:.1f} s; objects left behind: {len(self.leftovers)}; "
            f"revocation calls: {self.revocation_calls}, repeats: {self.repeat_revocations}, "
            f"repeats that revoked keys: {self.repeats_that_revoked_keys}"
        )


async def killer(
    controller: ControllerProcess, interval: tuple[float, float], rng: random.Random
) -> None:
    """SIGKILL the controller at random moments and start it again at once."""
    while True:
        await asyncio.sleep(rng.uniform(*interval))
        controller.kill()
        controller.start()


async def wait_all(
    client: AsyncClient, namespace: str, names: set[str], *, gone: bool, timeout: float
) -> float:
    started = time.monotonic()
    while True:
        remaining = set()
        async for obj in client.list(AITenant, namespace=namespace):
            name = obj["metadata"]["name"]
            if name not in names:
                continue
            if gone or not any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (obj.get("status") or {}).get("conditions") or []
            ):
                remaining.add(name)
        if not gone:
            remaining |= names - {
                o["metadata"]["name"] async for o in client.list(AITenant, namespace=namespace)
            }
        if not remaining:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            sample = sorted(remaining)[:5]
            raise TimeoutError(
                f"{len(remaining)} tenants not {'gone' if gone else 'Active'}: {sample}"
            )
        await asyncio.sleep(0.5)


async def leftovers(
    client: AsyncClient, names: set[str], *, aitenant_ns: str, infra_ns: str
) -> list[str]:
    """Everything a deleted tenant could have left behind."""
    found: list[str] = []
    async for obj in client.list(AITenant, namespace=aitenant_ns):
        if obj["metadata"]["name"] in names:
            found.append(f"AITenant {obj['metadata']['name']}")
    async for cm in client.list(
        ConfigMap, namespace=aitenant_ns, labels={contract.LABEL_GATEWAY_CLAIM: "true"}
    ):
        owner = ((cm.metadata and cm.metadata.annotations) or {}).get(
            contract.ANNOTATION_AITENANT_NAME
        )
        if owner in names:
            found.append(f"claim {cm.metadata.name if cm.metadata else '?'}")
    for namespace in (aitenant_ns, *(f"{contract.TENANT_NAMESPACE_PREFIX}{n}" for n in names)):
        with contextlib.suppress(ApiError):
            async for role in client.list(Role, namespace=namespace):
                role_name = (role.metadata.name if role.metadata else "") or ""
                if any(role_name.startswith(f"aitenant-{n}-") for n in names):
                    found.append(f"Role {namespace}/{role_name}")
    for name in names:
        tns = f"{contract.TENANT_NAMESPACE_PREFIX}{name}"
        with contextlib.suppress(ApiError):
            await client.get(MaasTenantConfig, contract.TENANT_CONFIG_NAME, namespace=tns)
            found.append(f"MaasTenantConfig {tns}")
        try:
            ns = await client.get(Namespace, tns)
        except ApiError:
            continue
        meta = ns.metadata
        ours = [
            k
            for k in {**((meta and meta.labels) or {}), **((meta and meta.annotations) or {})}
            if k.startswith("maas.opendatahub.io/") or k == contract.LABEL_GATEWAY_TENANT
        ]
        if ours:
            found.append(f"Namespace {tns} still carries {sorted(ours)}")
    infra = await client.get(Namespace, infra_ns)
    ledger = ((infra.metadata and infra.metadata.annotations) or {}).get(
        contract.ANNOTATION_GATEWAY_SELECTOR_LABELS, ""
    )
    for name in names:
        if f'"{name}"' in ledger:
            found.append(f"infra ledger entry for gateway {name}")
    return found


async def run_scenario(
    *,
    name: str,
    client: AsyncClient,
    controller: ControllerProcess,
    maas_api: FakeMaasApi,
    tenants: int,
    prefix: str,
    aitenant_ns: str,
    gateway_ns: str,
    infra_ns: str,
    kill_interval: tuple[float, float] | None = None,
    faults: Counter[str] | None = None,
    maas_api_outage: float = 0.0,
    seed: int = 1,
    timeout: float = 600.0,
    on_all_active: Callable[[float], None] = lambda seconds: None,
) -> Report:
    """Create ``tenants`` AITenants, wait until all are Active, delete them all, wait until
    they are gone, then look for anything left behind. The controller must be running.
    ``on_all_active`` hears the seconds to all Active as soon as they are known (a deletion
    that then times out loses the report, not that figure)."""
    rng = random.Random(seed)
    names = {f"{prefix}-{i}" for i in range(tenants)}
    for tenant in names:
        maas_api.keys[tenant] = rng.randint(1, 5)
    sem = asyncio.Semaphore(20)

    async def create(tenant: str) -> None:
        async with sem:
            with contextlib.suppress(ApiError):
                await samples.create_gateway(client, samples.gateway(tenant, gateway_ns))
            await samples.create_aitenant(client, samples.aitenant(tenant, aitenant_ns))

    async def delete(tenant: str) -> None:
        async with sem:
            with contextlib.suppress(ApiError):
                await client.delete(AITenant, tenant, namespace=aitenant_ns)

    starts_before = controller.starts
    chaos = asyncio.create_task(killer(controller, kill_interval, rng)) if kill_interval else None
    try:
        await asyncio.gather(*(create(t) for t in names))
        create_seconds = await wait_all(client, aitenant_ns, names, gone=False, timeout=timeout)
        on_all_active(create_seconds)
        calls_before = len(maas_api.calls)
        if maas_api_outage:
            maas_api.fail_status = 503
        started = time.monotonic()
        await asyncio.gather(*(delete(t) for t in names))
        if maas_api_outage:
            await asyncio.sleep(maas_api_outage)
            maas_api.fail_status = None
        await wait_all(client, aitenant_ns, names, gone=True, timeout=timeout)
        delete_seconds = time.monotonic() - started
    finally:
        if chaos is not None:
            chaos.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await chaos
        maas_api.fail_status = None
    successful = [(t, n) for t, n in maas_api.calls[calls_before:] if t in names and n >= 0]
    per_tenant = Counter(t for t, _ in successful)
    first_seen: set[str] = set()
    repeats_with_keys = 0
    for tenant, count in successful:
        if tenant in first_seen and count > 0:
            repeats_with_keys += 1
        first_seen.add(tenant)
    unrevoked = [t for t in names if per_tenant[t] == 0]
    left = await leftovers(client, names, aitenant_ns=aitenant_ns, infra_ns=infra_ns)
    left += [f"keys of {t} never revoked" for t in sorted(unrevoked)]
    return Report(
        name=name,
        tenants=tenants,
        faults=dict(faults or {}),
        restarts=controller.starts - starts_before,
        create_seconds=create_seconds,
        delete_seconds=delete_seconds,
        leftovers=left,
        revocation_calls=len(successful),
        repeat_revocations=sum(n - 1 for n in per_tenant.values() if n > 1),
        repeats_that_revoked_keys=repeats_with_keys,
    )
