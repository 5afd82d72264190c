"""The one place that interprets reconcile outcomes."""

from __future__ import annotations

import asyncio

import httpx2
import pytest
from lightkube import ApiError

from aitenant.runtime.control.controller import (
    Controller,
    Done,
    Key,
    RequeueAfter,
    Result,
    Retry,
)
from aitenant.runtime.serving.metrics import Metrics

KEY = Key("ns", "a")


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return value or 0.0


def count(metrics: Metrics, result: str) -> float:
    return sample(metrics, "aitenant_reconcile_total", controller="t", result=result)


def api_error(code: int) -> ApiError:
    request = httpx2.Request("GET", "https://api.invalid/x")
    status = {"kind": "Status", "code": code, "message": f"answer {code}"}
    return ApiError(request=request, response=httpx2.Response(code, request=request, json=status))


def returning(*results: Result) -> Controller:
    """A controller whose reconcile returns ``results`` in turn, with fresh metrics."""
    outcomes = list(results)

    async def reconcile(key: Key) -> Result:
        return outcomes.pop(0)

    return Controller("t", reconcile, metrics=Metrics(), workers=1)


async def test_error_requeues_with_backoff_and_success_forgets() -> None:
    metrics = Metrics()
    calls: list[Key] = []
    done = asyncio.Event()

    async def reconcile(key: Key) -> Result:
        calls.append(key)
        if len(calls) < 3:
            raise RuntimeError("boom")
        done.set()
        return Done()

    ctl = Controller("t", reconcile, metrics=metrics, workers=1)
    runner = asyncio.create_task(ctl.run())
    ctl.enqueue(KEY)
    await asyncio.wait_for(done.wait(), 5)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert calls == [KEY, KEY, KEY]
    assert ctl.queue.failures(KEY) == 0
    assert count(metrics, "error") == 2
    assert count(metrics, "success") == 1


async def test_an_exception_is_a_retry_with_backoff() -> None:
    async def reconcile(key: Key) -> Result:
        raise api_error(500)

    ctl = Controller("t", reconcile, metrics=Metrics(), workers=1)
    result = await ctl.process(KEY)
    assert isinstance(result, Retry)
    assert "answer 500" in result.why
    assert ctl.queue.failures(KEY) == 1
    assert ctl.queue.waiting == 1
    ctl.queue.shutdown()


@pytest.mark.parametrize(
    ("raised", "logged_as_error"),
    [
        (api_error(409), False),
        (api_error(503), False),
        (api_error(404), False),
        (api_error(403), True),
        (TypeError("x"), True),
    ],
)
async def test_an_unexpected_failure_is_logged_at_error_with_its_traceback(
    raised: Exception, logged_as_error: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A conflict, the server's trouble or an object deleted meanwhile is a routine retry;
    anything else an operator must see."""

    async def reconcile(key: Key) -> Result:
        raise raised

    ctl = Controller("t", reconcile, metrics=Metrics(), workers=1)
    with caplog.at_level("DEBUG", logger="aitenant.runtime.control.controller"):
        assert isinstance(await ctl.process(KEY), Retry)
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert bool(errors) is logged_as_error
    assert all(r.exc_info for r in errors), "with its traceback"
    ctl.queue.shutdown()


async def test_requeue_after_schedules_the_key_forgets_the_backoff_and_counts_requeue() -> None:
    ctl = returning(Retry("first"), RequeueAfter(30))
    await ctl.process(KEY)
    assert ctl.queue.failures(KEY) == 1
    assert await ctl.process(KEY) == RequeueAfter(30)
    assert ctl.queue.failures(KEY) == 0, "an expected wait is not a failure"
    assert ctl.queue.waiting == 1
    assert len(ctl.queue) == 0, "not queued now: after 30 s"
    assert count(ctl.metrics, "requeue") == 1
    ctl.queue.shutdown()


async def test_retry_backs_off_and_the_backoff_grows_while_it_lasts() -> None:
    ctl = returning(Retry("conflict"), Retry("conflict"))
    await ctl.process(KEY)
    await ctl.process(KEY)
    assert ctl.queue.failures(KEY) == 2
    assert ctl.queue.waiting == 1
    assert count(ctl.metrics, "error") == 2
    assert count(ctl.metrics, "requeue") == 0
    ctl.queue.shutdown()


async def test_done_schedules_nothing_and_forgets_the_backoff() -> None:
    ctl = returning(Retry(), Done())
    await ctl.process(KEY)
    ctl.queue.shutdown()  # cancels the backoff timer: only Done's effect is left to see
    await ctl.process(KEY)
    assert ctl.queue.failures(KEY) == 0
    assert ctl.queue.waiting == 0
    assert len(ctl.queue) == 0
    assert count(ctl.metrics, "success") == 1


def test_contradictory_results_cannot_be_built() -> None:
    with pytest.raises(TypeError):
        Retry(requeue_after=30)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    with pytest.raises(TypeError):
        RequeueAfter(30, retry=True)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    with pytest.raises(TypeError):
        Done(30)  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    for delay in (0, -1.0):
        with pytest.raises(ValueError, match="positive delay"):
            RequeueAfter(delay)


def test_metrics_are_zero_initialised() -> None:
    metrics = Metrics()
    Controller("c", lambda key: asyncio.sleep(0, Done()), metrics=metrics)
    text = metrics.render().decode()
    for result in ("success", "requeue", "error"):
        assert f'aitenant_reconcile_total{{controller="c",result="{result}"}} 0.0' in text
    assert 'aitenant_workqueue_depth{controller="c"} 0.0' in text
