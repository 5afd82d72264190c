"""What the benchmarks share with ``benchmarks/compare.py``.

* ``record``: a figure a benchmark measured, added to the JSON file named by
  ``AITENANT_BENCH_FIGURES`` (when set), so the comparison can print it next to the baseline's.
* ``controller_env``: the environment of a controller process; with
  ``AITENANT_BENCH_CONTROLLER_SRC`` set, the controller runs from that source tree (e.g. a
  worktree of the commit to compare with) while the benchmark itself runs from this one.
* ``webhook_configuration``: the webhook configuration as the controller under test renders it.
* ``wait_listening``, ``metrics_text``, ``parse_metrics``, ``api_by_verb``,
  ``reconciles_by_controller`` and ``wait_until_quiet``: reading a running controller.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

FIGURES_ENV = "AITENANT_BENCH_FIGURES"
CONTROLLER_SRC_ENV = "AITENANT_BENCH_CONTROLLER_SRC"


def record(name: str, value: float | str) -> None:
    path = os.environ.get(FIGURES_ENV)
    if not path:
        return
    target = Path(path)
    figures = json.loads(target.read_text()) if target.exists() else {}
    figures[name] = value
    target.write_text(json.dumps(figures, indent=1))


def controller_env() -> dict[str, str]:
    """Extra environment for a controller process (the source tree it runs from)."""
    src = os.environ.get(CONTROLLER_SRC_ENV)
    if not src:
        return {}
    return {"PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def webhook_configuration(*, name: str, ca_bundle_pem: bytes, url: str) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration the controller under test serves, rendered by its own
    source tree: a baseline's webhook server may not serve every path another checkout
    registers (the singleton-name webhooks came and went), and an unserved path fails every
    create."""
    code = (
        "import json, sys; from aitenant.webhook.config import render_webhook_configuration as r;"
        " a = json.load(sys.stdin);"
        " print(json.dumps(r(name=a['name'], ca_bundle_pem=a['ca'].encode(), url=a['url'])))"
    )
    request = json.dumps({"name": name, "ca": ca_bundle_pem.decode(), "url": url})
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=request,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **controller_env()},
    )
    return json.loads(done.stdout)


async def wait_listening(port: int, timeout: float = 120) -> None:
    """Until something accepts connections on loopback ``port`` (the servers start after the
    controller's first requests)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
        else:
            writer.close()
            await writer.wait_closed()
            return


def metrics_text(port: int) -> str:
    """The controller's /metrics page on loopback ``port``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


def parse_metrics(text: str) -> dict[str, float]:
    """Sample (name with labels) → value, from a Prometheus text page."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        values[name] = float(value)
    return values


def api_by_verb(metrics: dict[str, float]) -> dict[str, float]:
    """Requests the controller sent, by verb (every HTTP code)."""
    totals: dict[str, float] = {}
    for name, value in metrics.items():
        if name.startswith("aitenant_api_requests_total{"):
            verb = name.split('verb="')[1].split('"')[0]
            totals[verb] = totals.get(verb, 0) + value
    return totals


def by_verb_per_tenant(
    before: dict[str, float], after: dict[str, float], tenants: int
) -> dict[str, float]:
    """The controller's requests between two scrapes of its /metrics, by verb, per tenant."""
    return {
        verb: (after.get(verb, 0) - before.get(verb, 0)) / tenants
        for verb in sorted(set(after) | set(before))
    }


def verbs_line(per_tenant: dict[str, float]) -> str:
    return ", ".join(f"{verb} {n:.1f}" for verb, n in per_tenant.items() if n)


def requests(per_tenant: dict[str, float]) -> float:
    """Requests per tenant, watches left out (they stream; they are not work per tenant)."""
    return sum(n for verb, n in per_tenant.items() if verb != "WATCH")


def reconciles_by_controller(metrics: dict[str, float]) -> Counter[str]:
    """Reconcile passes finished (any outcome), by controller."""
    counts: Counter[str] = Counter()
    for name, value in metrics.items():
        if name.startswith("aitenant_reconcile_total{"):
            counts[name.split('controller="', 1)[1].split('"', 1)[0]] += int(value)
    return counts


def wait_until_quiet(port: int, *, quiet_s: float = 3.0, timeout_s: float = 900.0) -> float:
    """Block until the controller has sent no API request for ``quiet_s`` (its backlog is
    worked off); returns the seconds waited. Raises TimeoutError after ``timeout_s``."""
    started = time.monotonic()
    last_total, last_change = -1.0, started
    while True:
        now = time.monotonic()
        total = sum(api_by_verb(parse_metrics(metrics_text(port))).values())
        if total != last_total:
            last_total, last_change = total, now
        elif now - last_change >= quiet_s:
            return now - started
        if now - started > timeout_s:
            raise TimeoutError(f"controller still sending requests after {timeout_s:.0f} s")
        time.sleep(0.5)
