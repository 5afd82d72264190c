"""Taking over from another AITenant controller (a *peer*, e.g. the reference), and running
beside it fenced (README, "Beside the reference controller").

Runs only with a peer command (``devtools/peer.py``, benchmarks/README.md); both
controllers run as processes on a control plane of this module's own, each as its own user, so
the API server's audit log tells their requests apart:

* takeover, both directions: with the first controller's tenant Active, stop it and start the
  other; the tenant stays Active throughout, nothing of it is deleted or recreated, the maas-api
  Deployment does not roll, and the writes of the one taking over are counted and printed;
* beside it: our controller and the peer, the peer as the ServiceAccount the fence binds
  (deploy/maas-controller-fence.yaml), for ``AITENANT_PEER_MINUTES`` (default 3): no object is
  written by both, the tenant is Active throughout, and the peer reconciles the MaaS objects in
  the tenant namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from devtools import audit, peer, samples
from devtools.cluster import LocalCluster, User
from devtools.maas_api import FakeMaasApi
from devtools.node import cluster_with_node
from lightkube import AsyncClient, KubeConfig, codecs
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.apps_v1 import Deployment

from aitenant import contract
from aitenant.resources import AITenant

pytestmark = pytest.mark.e2e

COMMAND = peer.peer_command()
if COMMAND is None:
    pytest.skip(f"no peer controller: {peer.HOW_TO_RUN}", allow_module_level=True)

PEER_CRDS = Path(os.environ[peer.PEER_CRDS_ENV]) if os.environ.get(peer.PEER_CRDS_ENV) else None
MINUTES = float(os.environ.get("AITENANT_PEER_MINUTES", "3"))
FENCE = Path(__file__).parents[3] / "deploy" / "maas-controller-fence.yaml"
OURS = User("aitenant-controller", "aitenant-token", ("system:masters",))
# The peer unfenced (taking over), as the reference runs by default.
PEER = User("peer-controller", "peer-token", ("system:masters",))
# The identity the fence binds: the reference's default ServiceAccount.
FENCED = User(
    "system:serviceaccount:opendatahub:maas-controller",
    "fenced-token",
    ("system:serviceaccounts", "system:serviceaccounts:opendatahub"),
)
MaaSSubscription = create_namespaced_resource(
    contract.GROUP, contract.VERSION, "MaaSSubscription", "maassubscriptions"
)
MaaSAuthPolicy = create_namespaced_resource(
    contract.GROUP, contract.VERSION, "MaaSAuthPolicy", "maasauthpolicies"
)


@dataclass
class PhaseWatch:
    """Samples every AITenant's phase until stopped; keeps each sample that was not Active."""

    client: AsyncClient
    names: tuple[str, ...]
    not_active: list[tuple[float, str, str]] = field(default_factory=list)
    samples: int = 0

    async def run(self) -> None:
        while True:
            phases = {}
            async for t in self.client.list(AITenant, namespace=peer.AITENANT_NS):
                phases[t["metadata"]["name"]] = (t.get("status") or {}).get("phase", "")
            self.samples += 1
            for name in self.names:
                if phases.get(name) != "Active":
                    self.not_active.append((time.monotonic(), name, phases.get(name, "absent")))
            await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def watching(client: AsyncClient, *names: str) -> AsyncIterator[PhaseWatch]:
    watch = PhaseWatch(client, names)
    task = asyncio.create_task(watch.run())
    try:
        yield watch
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@dataclass
class PeerCluster:
    cluster: LocalCluster
    client: AsyncClient
    maas_api: FakeMaasApi

    def controller(self, name: str, command: str, user: User) -> peer.ControllerUnderTest:
        assert self.cluster.workdir is not None
        return peer.ControllerUnderTest(
            name,
            command.format(ca_file=self.maas_api.ca_file, ca_key_file=self.maas_api.ca_key_file),
            self.cluster.kubeconfig_for(user),
            self.cluster.workdir,
        )

    def ours(self) -> peer.ControllerUnderTest:
        return self.controller(
            "ours", peer.our_command(self.maas_api.ca_file, self.maas_api.ca_key_file), OURS
        )

    def theirs(self, user: User = PEER) -> peer.ControllerUnderTest:
        assert COMMAND is not None
        return self.controller("peer", COMMAND, user)


@pytest.fixture(scope="module")
def peer_cluster_control_plane() -> Iterator[LocalCluster]:
    with cluster_with_node(extra_users=[OURS, PEER, FENCED], audit=True) as cluster:
        yield cluster


@pytest.fixture(scope="module")
async def peer_cluster(peer_cluster_control_plane: LocalCluster) -> AsyncIterator[PeerCluster]:
    cluster = peer_cluster_control_plane
    assert cluster.workdir is not None
    client = AsyncClient(KubeConfig.from_file(cluster.kubeconfig), field_manager="peer-test")
    await peer.prepare(client, cluster.workdir, PEER_CRDS)
    maas_api = FakeMaasApi(cluster.workdir / "maas-api")
    await maas_api.start()
    try:
        yield PeerCluster(cluster, client, maas_api)
    finally:
        await maas_api.stop()
        await client.close()


async def wait_active(client: AsyncClient, name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    phase = ""
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            t = await client.get(AITenant, name, namespace=peer.AITENANT_NS)
            phase = (t.get("status") or {}).get("phase", "")
            if phase == "Active":
                return
        await asyncio.sleep(0.2)
    raise AssertionError(f"AITenant {name} not Active after {timeout:.0f} s (phase {phase!r})")


def snapshot(server: str, made: dict[str, audit.Request]) -> dict[str, tuple[str, int]]:
    """uid and generation of each object in ``made`` still there."""
    found = {}
    for key, request in made.items():
        obj = audit.get_raw(server, request.path)
        if obj is not None:
            meta = obj["metadata"]
            found[key] = (meta["uid"], int(meta.get("generation") or 0))
    return found


@dataclass
class Takeover:
    writes: list[audit.Request]  # by the controller taking over
    not_active: list[tuple[float, str, str]]  # phase samples of the tenant that were not Active
    samples: int
    recreated: set[str]  # objects of the tenant gone or with a new uid
    rolled: set[str]  # Deployments with a new generation
    final_phase: str  # the tenant's phase when the second controller stopped

    def report(self, title: str) -> None:
        refused = sum(w.code >= 400 for w in self.writes)
        print(
            f"\n{title}: {len(self.writes)} writes ({dict(Counter(w.verb for w in self.writes))})"
        )
        print(
            f"  {refused} refused; not Active in {len(self.not_active)} of {self.samples} samples"
        )
        print(f"  recreated or gone: {sorted(self.recreated)}; rolled: {sorted(self.rolled)}")
        print(f"  phase at the end: {self.final_phase}")
        for w in self.writes:
            print(f"  {w.verb} {w.key} -> {w.code}")


async def take_over(
    cluster: PeerCluster,
    first: peer.ControllerUnderTest,
    second: peer.ControllerUnderTest,
    tenant: str,
    handover: Callable[[], Awaitable[None]] | None = None,
) -> Takeover:
    """``first`` makes ``tenant`` Active and stops; ``second`` starts (then ``handover``, what
    the operator does) and runs for 20 s."""
    client, log, server = cluster.client, cluster.cluster.audit_log, cluster.cluster.server
    await samples.create_gateway(client, samples.gateway(tenant, peer.GATEWAY_NS))
    await samples.create_aitenant(client, samples.aitenant(tenant))
    users = {OURS.name, PEER.name}
    await peer.port_free(peer.PEER_WEBHOOK_PORT, 600)  # another peer run on this machine
    first.start()
    try:
        await first.wait_ready()
        await wait_active(client, tenant)
        await asyncio.sleep(5)  # its platform settled
    finally:
        first.stop()
    made = {r.key: r for r in audit.requests(log) if r.user in users and r.code < 400}
    before = snapshot(server, made)
    await peer.port_free(peer.PEER_WEBHOOK_PORT, 600)
    async with watching(client, tenant) as watch:
        started = time.time()
        second.start()
        try:
            await second.wait_ready()
            if handover is not None:
                await handover()
            await asyncio.sleep(20)  # several passes, a resync of everything it watches
            final = await client.get(AITenant, tenant, namespace=peer.AITENANT_NS)
        finally:
            second.stop()
    after = snapshot(server, made)
    return Takeover(
        writes=[r for r in audit.requests(log, since=started) if r.user in users],
        not_active=watch.not_active,
        samples=watch.samples,
        recreated={k for k, v in before.items() if k not in after or after[k][0] != v[0]},
        rolled={
            k for k in before if k.startswith("deployments.apps/") and after.get(k) != before[k]
        },
        final_phase=(final.get("status") or {}).get("phase", ""),
    )


async def test_we_take_over_from_the_peer(peer_cluster: PeerCluster) -> None:
    """The tenant stays Active, nothing is deleted, recreated or rolled, and an object the API
    will not let us take over is written once and reported, never retried in a loop."""
    result = await take_over(peer_cluster, peer_cluster.theirs(), peer_cluster.ours(), "red")
    result.report("ours taking over from the peer")
    assert result.not_active == [], "the tenant stayed Active throughout"
    assert result.recreated == set()
    assert result.rolled == set()
    assert [w for w in result.writes if w.verb == "delete"] == []
    refused = Counter(w.key for w in result.writes if w.code >= 400 and w.code != 409)
    assert all(n == 1 for n in refused.values()), f"a refused write retried: {refused}"


async def test_the_peer_takes_over_from_us(peer_cluster: PeerCluster) -> None:
    """The reverse, as the README's procedure says: our maas-api Deployment has a selector the
    peer cannot take over, so the operator deletes it once the peer runs; nothing else of the
    tenant is deleted or recreated, and the peer serves the tenant. What the peer writes on
    the way, and how long the tenant is not Active, is the peer's own and printed."""
    deployment = f"deployments.apps/{peer.INFRA_NS}/maas-api-green"

    async def delete_our_deployment() -> None:
        await peer_cluster.client.delete(Deployment, "maas-api-green", namespace=peer.INFRA_NS)

    result = await take_over(
        peer_cluster, peer_cluster.ours(), peer_cluster.theirs(), "green", delete_our_deployment
    )
    result.report("the peer taking over from ours")
    assert result.final_phase == "Active"
    assert result.recreated == {deployment}, "nothing else of the tenant deleted or recreated"


async def test_beside_the_fenced_peer_nothing_is_written_by_both(peer_cluster: PeerCluster) -> None:
    client, log = peer_cluster.client, peer_cluster.cluster.audit_log
    for obj in codecs.load_all_yaml(FENCE.read_text()):
        await client.apply(obj, field_manager="peer-test")
    await samples.create_gateway(client, samples.gateway("blue", peer.GATEWAY_NS))
    ours, theirs = peer_cluster.ours(), peer_cluster.theirs(FENCED)
    await peer.port_free(peer.PEER_WEBHOOK_PORT, 600)
    started = time.time()
    ours.start()
    theirs.start()
    try:
        await ours.wait_ready()
        await theirs.wait_ready()
        await samples.create_aitenant(client, samples.aitenant("blue"))
        await wait_active(client, "blue")
        tenant_ns = "ai-tenant-blue"
        await client.create(
            MaaSSubscription.from_dict(samples.maas_subscription("team", tenant_ns))
        )
        await client.create(MaaSAuthPolicy.from_dict(samples.maas_auth_policy("team", tenant_ns)))
        async with watching(client, "blue") as watch:
            await asyncio.sleep(MINUTES * 60)
        subscription = await client.get(MaaSSubscription, "team", namespace=tenant_ns)
        policy = await client.get(MaaSAuthPolicy, "team", namespace=tenant_ns)
    finally:
        theirs.stop()
        ours.stop()
    writes = audit.requests(log, since=started)
    by_user: dict[str, set[str]] = {}
    for w in writes:
        if w.code < 400:
            by_user.setdefault(w.user, set()).add(w.key)
    both = by_user.get(OURS.name, set()) & by_user.get(FENCED.name, set())
    print(f"\nbeside the fenced peer for {MINUTES:g} min:")
    for user in (OURS.name, FENCED.name):
        mine = [w for w in writes if w.user == user]
        print(
            f"  {user}: {len(mine)} writes, {sum(w.code >= 400 for w in mine)} refused, "
            f"{len(by_user.get(user, set()))} objects written"
        )
        refused = Counter(f"{w.verb} {w.key} -> {w.code}" for w in mine if w.code >= 400)
        for line, n in refused.most_common():
            print(f"    {n} x {line}")
    # The one object both write by design: the Gateway AuthPolicy, which we create once as a
    # placeholder and the peer's MaaSAuthPolicy reconciler fills (docs/differences.md D19).
    placeholder = f"authpolicies.kuadrant.io/{peer.GATEWAY_NS}/blue-maas-auth"
    ours_on_it = [w.verb for w in writes if w.user == OURS.name and w.key == placeholder]
    assert both - {placeholder} == set(), "no other object written by both"
    assert ours_on_it in ([], ["create"]), "the placeholder is only created by us"
    assert watch.not_active == [], "the tenant stayed Active throughout"
    assert subscription.get("status") or {}, "the peer reconciled the MaaSSubscription"
    assert policy.get("status") or {}, "the peer reconciled the MaaSAuthPolicy"
