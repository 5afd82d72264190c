"""Leader election with a Lease, against a scripted API at the transport."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from aitenant.runtime.control.leader import LeaderElector, LeaderLost

from ...scripted_api import ScriptedApi, echo, ok, status

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
LEASES = "/apis/coordination.k8s.io/v1/namespaces/ctl/leases"
LEASE = f"{LEASES}/aitenant-controller"


def lease(holder: str | None, renewed: dt.datetime = NOW, transitions: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "aitenant-controller", "namespace": "ctl", "resourceVersion": "5"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "acquireTime": "2026-06-01T11:00:00.000000Z",
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "leaseTransitions": transitions,
        },
    }


def elector(
    api: ScriptedApi, now: dt.datetime = NOW, *, retry_period: float = 2, renew_deadline: float = 10
) -> LeaderElector:
    return LeaderElector(
        api.client(),
        name="aitenant-controller",
        namespace="ctl",
        identity="me",
        now=lambda: now,
        retry_period=retry_period,
        renew_deadline=renew_deadline,
    )


async def test_no_lease_is_created_with_us_as_holder() -> None:
    api = ScriptedApi().on("CREATE", LEASES, echo())
    leader = elector(api)
    await leader.acquire()
    assert leader.is_leader.is_set()
    (body,) = api.bodies("CREATE", LEASES)
    assert body["spec"]["holderIdentity"] == "me"
    assert body["spec"]["leaseDurationSeconds"] == 15


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.value = 1000.0

    def __call__(self) -> float:
        return self.value


def elector_at(
    api: ScriptedApi, clock: Clock, wall: dt.datetime = NOW, retry_period: float = 2
) -> LeaderElector:
    return LeaderElector(
        api.client(),
        name="aitenant-controller",
        namespace="ctl",
        identity="me",
        now=lambda: wall + dt.timedelta(seconds=clock.value - 1000.0),
        monotonic=clock,
        retry_period=retry_period,
    )


async def test_a_lease_held_by_another_is_left_alone_until_it_expires() -> None:
    api = ScriptedApi().on("GET", LEASE, ok(lease("other", transitions=2)))
    api.on("UPDATE", LEASE, echo(200))
    clock = Clock()
    standby = elector_at(api, clock)
    assert not await standby.try_acquire_or_renew()  # first seen now
    clock.value += 10
    assert not await standby.try_acquire_or_renew()
    assert api.writes == []

    clock.value += 6  # 16 s without a change of the record: the holder is gone
    assert await standby.try_acquire_or_renew()
    (body,) = api.bodies("UPDATE", LEASE)
    assert body["spec"]["holderIdentity"] == "me"
    assert body["spec"]["leaseTransitions"] == 3
    assert body["metadata"]["resourceVersion"] == "5", "compare-and-swap on the version read"


@pytest.mark.parametrize("skew", [20.0, -20.0])
async def test_a_standby_with_a_skewed_clock_never_takes_a_live_lease(skew: float) -> None:
    """The holder renews every 2 s by its own clock; the standby's wall clock is ``skew``
    seconds off. Expiry is measured from when the standby saw the record change, so a live
    Lease is never taken, and a dead one is taken one lease duration after its last change."""
    renewed = [NOW]

    def current(_: Any) -> Any:
        return ok(lease("other", renewed=renewed[-1]))

    api = ScriptedApi().on("GET", LEASE, current).on("UPDATE", LEASE, echo(200))
    clock = Clock()
    standby = elector_at(api, clock, wall=NOW + dt.timedelta(seconds=skew), retry_period=2)
    for _ in range(30):  # a minute of the holder renewing
        assert not await standby.try_acquire_or_renew()
        clock.value += 2
        renewed.append(renewed[-1] + dt.timedelta(seconds=2))
    assert api.writes == [], "the standby wrote to a live Lease"

    # The holder dies: its record stops changing. Taken after a lease duration, not sooner.
    for _ in range(8):  # the last renewal seen, then 2 to 14 s without a change
        clock.value += 2
        assert not await standby.try_acquire_or_renew()
    clock.value += 2  # 16 s
    assert await standby.try_acquire_or_renew()
    (body,) = api.bodies("UPDATE", LEASE)
    assert body["spec"]["holderIdentity"] == "me"


async def test_losing_a_race_is_not_an_error() -> None:
    api = ScriptedApi().on("CREATE", LEASES, status(409, "AlreadyExists"))
    assert not await elector(api).try_acquire_or_renew()
    api = ScriptedApi().on("GET", LEASE, ok(lease("me"))).on("UPDATE", LEASE, status(409))
    assert not await elector(api).try_acquire_or_renew()


async def test_renewals_failing_past_the_deadline_lose_the_lease() -> None:
    api = ScriptedApi().on("GET", LEASE, ok(lease("me"))).on("UPDATE", LEASE, status(500))
    # A deadline with room for two tries or more on a loaded machine.
    leader = elector(api, retry_period=0.01, renew_deadline=0.5)
    leader.is_leader.set()
    with pytest.raises(LeaderLost, match="ctl/aitenant-controller"):
        await leader.hold()
    assert not leader.is_leader.is_set()
    assert len(api.requests("UPDATE")) >= 2, "it kept trying until the deadline"


async def test_release_gives_the_lease_up_only_when_we_hold_it() -> None:
    api = ScriptedApi().on("GET", LEASE, ok(lease("me"))).on("UPDATE", LEASE, echo(200))
    leader = elector(api)
    await leader.release()
    assert api.sent == [], "not the leader: nothing to give up"
    leader.is_leader.set()
    await leader.release()
    (body,) = api.bodies("UPDATE", LEASE)
    assert body["spec"].get("holderIdentity") is None  # omitted: nobody holds it
    assert body["spec"].get("renewTime") is None
    assert body["spec"]["leaseDurationSeconds"] == 15
    assert not leader.is_leader.is_set()
