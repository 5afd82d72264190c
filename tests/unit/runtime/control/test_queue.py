"""The keyed work queue: de-duplication, one worker per key, delays and backoff."""

from __future__ import annotations

import asyncio

import pytest

from aitenant.runtime.control.queue import ShutDown, WorkQueue


async def test_duplicate_adds_are_collapsed() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    assert await queue.get() == "a"
    assert await queue.get() == "b"


async def test_key_in_flight_is_requeued_once_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")  # arrives while a worker holds the key
    queue.add("a")
    assert len(queue) == 0, "a key being processed must not be handed to a second worker"
    queue.done(key)
    assert len(queue) == 1
    assert await queue.get() == "a"


async def test_add_after_keeps_the_earliest_delay() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 5.0)
    queue.add_after("a", 0.05)
    queue.add_after("a", 3.0)
    assert queue.waiting == 1
    assert await asyncio.wait_for(queue.get(), 1.0) == "a"


async def test_backoff_grows_exponentially_up_to_the_cap_and_forget_resets() -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.1, max_delay=0.5)
    delays = [queue.next_backoff("a") for _ in range(5)]
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])
    queue.forget("a")
    assert queue.next_backoff("a") == pytest.approx(0.1)
    assert queue.failures("b") == 0


async def test_waiting_workers_wake_for_new_keys_and_stop_on_shutdown() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(queue.get()) for _ in range(2)]
    await asyncio.sleep(0)
    queue.add("a")
    done, pending = await asyncio.wait(getters, timeout=1, return_when=asyncio.FIRST_COMPLETED)
    assert [t.result() for t in done] == ["a"]
    queue.shutdown()
    with pytest.raises(ShutDown):
        await asyncio.wait_for(pending.pop(), 1)


async def test_shutdown_cancels_delayed_keys() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0.01)
    queue.shutdown()
    await asyncio.sleep(0.05)
    assert len(queue) == 0


async def test_low_priority_keys_wait_behind_normal_ones_and_can_be_promoted() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("settled-1", "settled-2", "settled-3"):
        queue.add(key, low_priority=True)
    queue.add("new")
    queue.add("settled-2")  # an event with work for a queued settled key promotes it
    queue.add("settled-3", low_priority=True)  # already queued: stays where it is
    assert len(queue) == 4
    order = [await queue.get() for _ in range(4)]
    assert order == ["new", "settled-2", "settled-1", "settled-3"]
    assert len(queue) == 0
    queue.shutdown()
