"""What the benchmarks share with ``benchmarks/compare.py``.

* ``record``: a figure a benchmark measured, added to the JSON file named by
  ``AITENANT_BENCH_FIGURES`` (when set), so the comparison can print it next to the baseline's.
* ``controller_env``: the environment of a controller process; with
  ``AITENANT_BENCH_CONTROLLER_SRC`` set, the controller runs from that source tree (e.g. a
  worktree of the commit to compare with) while the benchmark itself runs from this one.
* ``webhook_configuration``: the webhook configuration as the controller under test renders it.
* ``wait_listening``, ``metrics_text``, ``parse_metrics``, ``api_by_verb``,
  ``reconciles_by_controller`` and ``wait_until_quiet``: reading a running controller.
* ``process_cpu_seconds``, ``peak_rss_mb`` and ``session_pids``: what a process costs, read
  from ``/proc``; ``MachineCpu``: where the whole machine's CPU went over a stretch, by process.
* ``percentile``, ``fmt`` and ``markdown_table``: the figures as the benchmarks print them.
* ``webhook_calls``: the API server's own timing of its calls to the AITenant webhook.
* ``precompile``: bytecode for the trees a controller imports, as the image has it.
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
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from aitenant import contract

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
        env={**os.environ, **controller_env()},
    )
    if done.returncode != 0:
        raise RuntimeError(f"rendering the webhook configuration failed:\n{done.stderr[-2000:]}")
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


class WebhookCalls(NamedTuple):
    """The API server's histogram of its AITenant webhook calls: count, seconds in all, and how
    many took at most 5 ms (its finest bucket)."""

    calls: float
    seconds: float
    within_5ms: float

    def __sub__(self, other: object) -> WebhookCalls:
        assert isinstance(other, WebhookCalls)
        return WebhookCalls(*(a - b for a, b in zip(self, other, strict=True)))


def webhook_calls(
    kubeconfig: Path, kubectl: str = "kubectl", webhook: str = contract.WEBHOOK_NAME
) -> WebhookCalls:
    """The API server's calls to ``webhook`` so far (its /metrics, read with ``kubectl``)."""
    text = subprocess.run(
        [kubectl, "--kubeconfig", str(kubeconfig), "get", "--raw", "/metrics"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    metric = "apiserver_admission_webhook_admission_duration_seconds"
    values = {"_count": 0.0, "_sum": 0.0, "_bucket": 0.0}
    for sample, value in parse_metrics(text).items():
        if not sample.startswith(metric) or f'name="{webhook}"' not in sample:
            continue
        suffix = sample[len(metric) :].split("{", 1)[0]
        if suffix == "_bucket" and 'le="0.005"' not in sample:
            continue
        if suffix in values:
            values[suffix] += value
    return WebhookCalls(values["_count"], values["_sum"], values["_bucket"])


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


def _stat(pid: int) -> tuple[str, list[str]]:
    """Process ``pid``'s command name and the fields of proc(5)'s stat after it (the name may
    hold spaces and parentheses): [0] of the fields is field 3."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 1 :].split()


def _stat_fields(pid: int) -> list[str]:
    return _stat(pid)[1]


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` and of the children it waited for."""
    # utime, stime, cutime, cstime are fields 14-17 of stat.
    return sum(int(v) for v in _stat_fields(pid)[11:15]) / os.sysconf("SC_CLK_TCK")


def _busy_seconds() -> tuple[float, float]:
    """CPU seconds the machine has spent busy since boot, all cores, and of those the
    interrupts' (the first line of proc(5)'s /proc/stat; guest time is in user already).
    Interrupts are mostly the network stack's softirqs, which no process is charged for."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    hz = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq + steal) / hz, (irq + softirq) / hz


def _cpu_by_process(names: dict[int, str]) -> dict[str, float]:
    """CPU seconds of every live process, summed by ``names[pid]`` or else its command name."""
    hz = os.sysconf("SC_CLK_TCK")
    spent: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            comm, fields = _stat(pid)
        except OSError:  # gone meanwhile
            continue
        name = names.get(pid, comm)
        spent[name] = spent.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / hz
    return spent


class CpuSpent(NamedTuple):
    wall: float
    busy: float  # every core's busy time
    interrupts: float  # of ``busy``
    by_process: dict[str, float]  # live processes by name; those that ended are in busy only


class MachineCpu:
    """Where the machine's CPU went between ``__init__`` and ``took``: the busy total, the
    interrupts' share and each live process's by command name (``names`` renames some, e.g.
    the controller)."""

    def __init__(self, names: dict[int, str]) -> None:
        self.names = names
        self.started = time.monotonic()
        self.busy, self.interrupts = _busy_seconds()
        self.by_process = _cpu_by_process(names)

    def took(self) -> CpuSpent:
        now = _cpu_by_process(self.names)
        spent = {name: cpu - self.by_process.get(name, 0.0) for name, cpu in now.items()}
        busy, interrupts = _busy_seconds()
        return CpuSpent(
            time.monotonic() - self.started,
            busy - self.busy,
            interrupts - self.interrupts,
            {name: cpu for name, cpu in spent.items() if cpu > 0},
        )


def peak_rss_mb(pid: int) -> float:
    """High-water mark of process ``pid``'s resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def session_pids(sid: int) -> list[int]:
    """The live processes of session ``sid`` (a command started with ``start_new_session``:
    a shell and whatever it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int(_stat_fields(int(entry.name))[3]) == sid:
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
    return found


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile (0 <= q <= 1) of ``values``, no interpolation: the value at index
    ``floor(n * q)`` of the sorted values (the largest for q = 1), so a p99 of fewer than 100
    values is the largest."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def fmt(value: object) -> str:
    """A figure as the tables print it: two decimals below 10, one below 100, then none."""
    if isinstance(value, float):
        # The bounds are where rounding would carry into the next digit (9.996 is "10.0").
        if abs(value) < 9.995:
            return f"{value:.2f}"
        # One decimal below 100, where a whole unit matters (e.g. requests per tenant).
        return f"{value:.1f}" if abs(value) < 99.95 else f"{value:.0f}"
    return "-" if value is None else str(value)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table; cells through ``fmt``, any ``|`` in them escaped."""

    def line(cells: Sequence[object]) -> str:
        return "| " + " | ".join(fmt(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *(line(r) for r in rows)])


def precompile(trees: Iterable[Path]) -> None:
    """Bytecode for ``trees`` (and the interpreter's site-packages), as the image has it
    (rockcraft.yaml compiles it): otherwise a controller's start measures compiling, and only
    for a tree without ``__pycache__``."""
    import sysconfig

    for tree in (*trees, Path(sysconfig.get_paths()["purelib"])):
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "-j0", str(tree)],
            check=False,
            capture_output=True,
        )
