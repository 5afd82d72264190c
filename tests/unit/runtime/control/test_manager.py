"""The manager: what waits for the informers and the Lease, and how the process ends."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from aitenant.resources import AITenant
from aitenant.runtime.cache.informer import Informer
from aitenant.runtime.control.controller import Controller, Done, Key, Result
from aitenant.runtime.control.leader import LeaderElector, LeaderLost
from aitenant.runtime.control.manager import Manager
from aitenant.runtime.serving.metrics import Metrics

from ...scripted_api import ScriptedApi, echo, ok, status
from .test_leader import LEASE, LEASES, lease

PATH = "/apis/maas.opendatahub.io/v1alpha1/aitenants"


def unstarted_informer() -> Informer:
    """An informer the test marks synced itself (it is not run: nothing is sent)."""
    return Informer(ScriptedApi().client(), AITenant)


async def test_a_controller_waits_for_its_caches_and_leader_work_for_the_required_ones() -> None:
    caches, required = unstarted_informer(), unstarted_informer()
    order: list[str] = []
    reconciled, led = asyncio.Event(), asyncio.Event()

    async def reconcile(key: Key) -> Result:
        order.append("reconcile")
        reconciled.set()
        return Done()

    controller = Controller("t", reconcile, metrics=Metrics(), workers=1, caches=[caches])
    controller.enqueue(Key("ns", "a"))

    async def every_replica() -> None:
        for informer, name in ((caches, "caches"), (required, "required")):
            for _ in range(5):  # the leader side has had its chance to start by now
                await asyncio.sleep(0)
            order.append(f"{name} synced")
            informer.synced.set()

    async def leader_only() -> None:
        order.append("leader")
        led.set()

    manager = Manager(
        required_informers=[required],
        controllers=[controller],
        runnables=[every_replica],
        leader_runnables=[leader_only],
    )
    assert manager.ready_problem() == "informers not synced: AITenant"
    run = asyncio.create_task(manager.run())
    await asyncio.wait_for(asyncio.gather(reconciled.wait(), led.wait()), 5)
    assert order == ["caches synced", "reconcile", "required synced", "leader"]
    assert manager.ready_problem() is None
    manager.stop()
    await asyncio.wait_for(run, 5)


async def test_an_informer_lists_only_when_it_gets_a_slot() -> None:
    api = ScriptedApi().on(
        "GET",
        PATH,
        ok({"items": [], "metadata": {"resourceVersion": "1"}}),
    )
    informer = Informer(api.client(), AITenant)
    lists = asyncio.Semaphore(1)
    await lists.acquire()  # another informer is listing
    run = asyncio.create_task(informer.run(lists))
    await asyncio.sleep(0.05)
    assert api.requests() == []
    lists.release()
    await asyncio.wait_for(informer.synced.wait(), 5)
    assert api.requests("GET") == [("GET", PATH)]
    assert not lists.locked(), "the slot is given back once the list is done"
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run


async def test_losing_the_lease_ends_the_run_with_leader_lost() -> None:
    api = ScriptedApi().on("CREATE", LEASES, echo()).on("UPDATE", LEASE, status(500))
    api.on("GET", LEASE, status(404), ok(lease("me")))  # none at first, then ours
    elector = LeaderElector(
        api.client(),
        name="aitenant-controller",
        namespace="ctl",
        identity="me",
        retry_period=0.01,
        renew_deadline=0.05,
    )
    led = asyncio.Event()

    async def leader_only() -> None:
        led.set()
        await asyncio.Event().wait()

    manager = Manager(elector=elector, leader_runnables=[leader_only])
    with pytest.raises(ExceptionGroup) as info:
        await asyncio.wait_for(manager.run(), 5)
    assert led.is_set(), "leader work ran while the Lease was held"
    assert info.group_contains(LeaderLost)
    assert api.requests("CREATE") == [("CREATE", LEASES)]


async def test_stop_ends_the_run_and_gives_the_lease_up() -> None:
    api = ScriptedApi().on("CREATE", LEASES, echo()).on("UPDATE", LEASE, echo(200))
    api.on("GET", LEASE, status(404), ok(lease("me")))
    elector = LeaderElector(
        api.client(), name="aitenant-controller", namespace="ctl", identity="me"
    )
    manager = Manager(elector=elector, leader_runnables=[lambda: _stop_when_leading(manager)])

    await asyncio.wait_for(manager.run(), 5)

    assert not elector.is_leader.is_set()
    (released,) = api.bodies("UPDATE", LEASE)
    assert released["spec"].get("holderIdentity") is None


async def _stop_when_leading(manager: Manager) -> None:
    manager.stop()
    await asyncio.Event().wait()
