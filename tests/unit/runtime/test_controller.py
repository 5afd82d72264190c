"""The one place that interprets reconcile outcomes."""

from __future__ import annotations

import asyncio

import pytest

from aitenant.runtime.controller import Controller, Key, Result
from aitenant.runtime.metrics import Metrics


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return value or 0.0


async def test_error_requeues_with_backoff_and_success_forgets() -> None:
    metrics = Metrics()
    calls: list[Key] = []

    async def reconcile(key: Key) -> Result:
        calls.append(key)
        if len(calls) < 3:
            raise RuntimeError("transient")
        return Result()

    ctl = Controller("t", reconcile, metrics=metrics, workers=1)
    key = Key("ns", "a")
    runner = asyncio.create_task(ctl.run())
    ctl.enqueue(key)
    for _ in range(100):
        if len(calls) >= 3:
            break
        await asyncio.sleep(0.02)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert calls == [key, key, key]
    assert ctl.queue.failures(key) == 0
    assert sample(metrics, "aitenant_reconcile_total", controller="t", result="error") == 2
    assert sample(metrics, "aitenant_reconcile_total", controller="t", result="success") == 1


async def test_requeue_after_schedules_the_key_and_counts_requeue() -> None:
    metrics = Metrics()
    ctl = Controller("t", lambda key: _requeue(), metrics=metrics, workers=1)
    await ctl.process(Key("ns", "a"))
    assert ctl.queue.waiting == 1
    assert sample(metrics, "aitenant_reconcile_total", controller="t", result="requeue") == 1
    ctl.queue.shutdown()


async def test_retry_backs_off_like_an_error_and_keeps_counting() -> None:
    metrics = Metrics()

    async def reconcile(key: Key) -> Result:
        return Result(retry=True, requeue_after=30)

    ctl = Controller("t", reconcile, metrics=metrics, workers=1)
    key = Key("ns", "a")
    await ctl.process(key)
    await ctl.process(key)
    assert ctl.queue.failures(key) == 2, "the backoff grows while the failure lasts"
    assert ctl.queue.waiting == 1
    assert sample(metrics, "aitenant_reconcile_total", controller="t", result="error") == 2
    assert sample(metrics, "aitenant_reconcile_total", controller="t", result="requeue") == 0
    ctl.queue.shutdown()


async def _requeue() -> Result:
    return Result(requeue_after=30)


def test_metrics_are_zero_initialised() -> None:
    metrics = Metrics()
    Controller("c", lambda key: _requeue(), metrics=metrics)
    text = metrics.render().decode()
    for result in ("success", "requeue", "error"):
        assert f'aitenant_reconcile_total{{controller="c",result="{result}"}} 0.0' in text
    assert 'aitenant_workqueue_depth{controller="c"} 0.0' in text
