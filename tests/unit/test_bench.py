"""The benchmarks' pure helpers: percentiles, the figures' format, tables, audit-log counts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from benchmarks import side_by_side
from devtools import audit, bench


def test_percentile_takes_the_value_at_floor_n_q() -> None:
    values = [float(v) for v in range(1, 201)]  # 1..200, shuffled below
    shuffled = values[::2] + values[1::2]
    assert bench.percentile(shuffled, 0.99) == 199.0  # index 198
    assert bench.percentile(shuffled, 0.5) == 101.0
    assert bench.percentile(shuffled, 1.0) == 200.0
    assert bench.percentile(shuffled, 0.0) == 1.0


def test_percentile_of_fewer_than_100_values_is_the_largest_for_p99() -> None:
    assert bench.percentile([3.0, 1.0, 2.0], 0.99) == 3.0
    with pytest.raises(ValueError, match="no values"):
        bench.percentile([], 0.5)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.4213, "0.42"),
        (9.996, "10.0"),
        (42.16, "42.2"),
        (99.99999, "100"),
        (421.6, "422"),
        (-3.0, "-3.00"),
        (None, "-"),
        (7, "7"),
    ],
)
def test_fmt(value: object, shown: str) -> None:
    assert bench.fmt(value) == shown


def test_markdown_table_formats_cells_and_escapes_bars() -> None:
    text = bench.markdown_table(["figure", "ours"], [["a|b", 1.234], ["c", None]])
    assert text.splitlines() == [
        "| figure | ours |",
        "|---|---|",
        "| a\\|b | 1.23 |",
        "| c | - |",
    ]


def event(user: str, verb: str, stamp: str, resource: str = "secrets", **extra: object) -> str:
    return json.dumps(
        {
            "stage": "ResponseComplete",
            "user": {"username": user},
            "verb": verb,
            "requestReceivedTimestamp": stamp,
            "objectRef": {"resource": resource, **extra},
            "requestURI": "/api/v1/x",
        }
    )


def test_audit_counts_one_users_requests_since_the_last_take(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(
        "\n".join(
            [
                event("controller", "get", "2026-01-01T00:00:01.000000Z"),
                event("controller", "watch", "2026-01-01T00:00:01.000000Z"),
                event("admin", "create", "2026-01-01T00:00:01.000000Z"),
                event("controller", "patch", "2026-01-01T00:00:02.500000Z", subresource="status"),
            ]
        )
        + "\n"
        + event("controller", "get", "2026-01-01T00:00:03.000000Z")  # not yet complete
    )
    reader = audit.Audit(log, "controller")
    counts = reader.take()
    assert counts == {"get secrets": 1, "patch secrets/status": 1}
    assert audit.writes(counts) == 1
    assert audit.breakdown(counts, 2) == "get secrets 0.50, patch secrets/status 0.50"
    with log.open("a") as out:
        out.write("\n" + event("controller", "delete", "2026-01-01T00:00:04.000000Z") + "\n")
    assert reader.take() == {"get secrets": 1, "delete secrets": 1}


def test_a_review_is_a_question_not_a_write() -> None:
    counts = Counter({"create selfsubjectreviews": 1, "create subjectaccessreviews": 2})
    assert audit.writes(counts) == 0
    assert audit.writes(counts + Counter({"create leases": 1})) == 1


def test_audit_window_keeps_requests_received_within_it(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    stamps = ["2026-01-01T00:00:01.000000Z", "2026-01-01T00:00:02.000000Z"]
    log.write_text("".join(event("controller", "get", s) + "\n" for s in stamps))
    start = audit.audit_time("2026-01-01T00:00:01.500000Z")
    assert audit.Audit(log, "controller").take(window=(start, start + 1)) == {"get secrets": 1}


def test_requests_by_client_counts_every_client_within_the_window(tmp_path: Path) -> None:
    deployments = "kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/8f2c1e0/deployment"
    log = tmp_path / "audit.log"
    log.write_text(
        "".join(
            json.dumps({**json.loads(event(user, verb, f"2026-01-01T00:00:0{s}Z")), "userAgent": a})
            + "\n"
            for user, verb, s, a in [
                ("controller", "get", 1, "python-httpx/0.28"),
                ("admin", "patch", 2, "kwok/v0.7.0 (linux/amd64) kwok/abc"),
                ("admin", "watch", 2, "kwok/v0.7.0 (linux/amd64) kwok/abc"),  # left out
                ("admin", "create", 3, deployments),
                ("admin", "patch", 5, "kwok/v0.7.0 (linux/amd64) kwok/abc"),  # after the window
            ]
        )
    )
    window = (audit.audit_time("2026-01-01T00:00:01Z"), audit.audit_time("2026-01-01T00:00:04Z"))
    assert audit.requests_by_client(log, window) == {
        "python-httpx (controller)": 1,
        "kwok (admin)": 1,
        "kube-controller-manager/deployment (admin)": 1,
    }


def test_side_by_side_table_has_one_column_per_controller() -> None:
    sizes = side_by_side.Sizes(sequential=10, burst=20, tenants=60, delete=25)
    assert sizes.rest == 29
    assert sizes.created == 59
    assert sizes.standing == 60
    lines = side_by_side.table(
        {"ours": {"create_p50_ms": 380.4, "burst_s": 0.8}, "peer": {"create_p50_ms": 2900.0}},
        sizes,
    ).splitlines()
    assert lines[0] == "| figure | ours | peer |"
    assert len(lines) == 2 + len(side_by_side.LABELS)
    assert "| create-to-Ready p50, 10 one after another (ms) | 380 | 2900 |" in lines
    assert "| 20 created at once, all Ready (s) | 0.80 | - |" in lines
    assert "| controller peak RSS at 60 tenants (MB) | - | - |" in lines


def test_side_by_side_sizes_never_go_below_the_tenants_already_made() -> None:
    sizes = side_by_side.Sizes(sequential=5, burst=10, tenants=12, delete=100)
    assert sizes.rest == 0
    assert sizes.standing == 16
    assert sizes.deleted == 15


def test_machine_cpu_names_a_busy_child_and_counts_it_in_the_busy_total() -> None:
    spin = (
        "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
        "print('spun', flush=True)\ntime.sleep(30)"
    )
    with subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True) as child:
        try:
            machine = bench.MachineCpu({child.pid: "spinner"})  # before it runs any Python
            assert child.stdout is not None
            assert child.stdout.readline() == "spun\n"  # however busy the machine is
            spent = machine.took()
        finally:
            child.kill()
    assert spent.by_process["spinner"] >= 0.28  # it spun while we watched, as named
    assert spent.busy >= spent.by_process["spinner"] - 0.02  # in the total (10 ms ticks)
    assert 0 <= spent.interrupts <= spent.busy


def test_webhook_configuration_is_rendered_by_the_source_tree_under_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = bench.webhook_configuration(name="bench", ca_bundle_pem=b"", url="https://127.0.0.1:1/x")
    assert body["metadata"]["name"] == "bench"
    assert body["webhooks"][0]["clientConfig"]["url"] == "https://127.0.0.1:1/x"
    # A tree that cannot render it says why (the child's traceback), not only its exit status.
    broken = tmp_path / "aitenant" / "webhook"
    broken.mkdir(parents=True)
    (tmp_path / "aitenant" / "__init__.py").write_text("")
    (broken / "__init__.py").write_text("")
    (broken / "config.py").write_text("raise ImportError('this tree is broken')\n")
    monkeypatch.setenv(bench.CONTROLLER_SRC_ENV, str(tmp_path))
    with pytest.raises(RuntimeError, match="this tree is broken"):
        bench.webhook_configuration(name="bench", ca_bundle_pem=b"", url="https://127.0.0.1:1/x")
