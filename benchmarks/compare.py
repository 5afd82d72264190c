"""Every figure of the benchmarks for this checkout next to the same figure for a baseline commit.

    python benchmarks/compare.py --baseline REV            # create/burst/resync/restart/
                                                           # delete, chaos scenario 2, webhook
    python benchmarks/compare.py --baseline REV --only soak --soak-tenants 1000

The baseline is checked out into a temporary git worktree; each benchmark runs twice, one
after the other, with the controller process started from the baseline's source tree and then
from this one (the benchmark code, the local control plane and the load are the same). Each
run writes its figures to a JSON file (``devtools.bench``); the table at the end puts
them side by side. Prints figures; never fails on a time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from devtools import bench

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# (figure, label) in the order of benchmarks/README.md's table, then the rest.
LABELS = [
    ("create_p50_ms", "create-to-Ready p50, sequential (ms)"),
    ("create_p99_ms", "create-to-Ready p99, sequential (ms)"),
    ("burst_s", "burst created at once, all Ready (s)"),
    ("requests_per_tenant", "API requests per new tenant"),
    ("resync_gets_per_tenant", "GETs per tenant on resync (fresh process)"),
    ("resync_object_gets", "GETs of single objects on that resync, in all"),
    ("resync_writes", "writes on that resync"),
    ("peak_rss_mb", "controller peak RSS after the burst (MB)"),
    ("soak_peak_rss_mb", "controller peak RSS, soak (MB)"),
    ("soak_rss_active_mb", "controller RSS with every soak tenant Active (MB)"),
    ("import_s", "importing the controller (s)"),
    ("start_to_first_reconcile_s", "process start to first reconcile (s)"),
    ("soak_active_s", "soak tenants created (20 in flight), all Active (s)"),
    ("soak_resync_gets_per_tenant", "soak: GETs per tenant on resync"),
    ("soak_resync_writes", "soak: writes on resync"),
    ("chaos2_active_s", "chaos scenario 2, all Active (s)"),
    ("chaos2_restarts", "chaos scenario 2, controller restarts"),
    ("chaos2_leftovers", "chaos scenario 2, objects left behind"),
    (
        "webhook_api_busy_p99_ms",
        "create via the API server with the webhook, 1,000 reconciling, p99 (ms)",
    ),
    (
        "webhook_api_p99_ms",
        "create via the API server with the webhook, controller quiet, p99 (ms)",
    ),
    ("api_create_p99_ms", "the same creates without the webhook, p99 (ms)"),
    ("webhook_api_call_mean_ms", "webhook call as the API server timed it, mean (ms)"),
    ("soak_webhook_direct_p99_ms", "soak: webhook p99, direct, at the end (ms)"),
    ("delete_all_s", "every tenant of the burst run deleted at once, all gone (s)"),
    ("deletion_requests_per_tenant", "API requests per deleted tenant"),
    ("deletion_gets_per_tenant", "GETs per deleted tenant"),
]


def benchmarks(args: argparse.Namespace) -> dict[str, list[str]]:
    return {
        "create": [
            "create_to_ready.py",
            f"--sequential={args.sequential}",
            f"--burst={args.burst}",
        ],
        "chaos": ["chaos.py", "--scenarios=2", f"--tenants={args.chaos_tenants}"],
        "webhook": [
            "webhook_latency.py",
            f"--requests={args.webhook_requests}",
            f"--api-creates={args.webhook_api_creates}",
        ],
        "soak": ["soak.py", f"--tenants={args.soak_tenants}"],
    }


def run_one(script: list[str], controller_src: Path, figures: Path, log: Path) -> None:
    env = {
        **os.environ,
        bench.CONTROLLER_SRC_ENV: str(controller_src),
        bench.FIGURES_ENV: str(figures),
    }
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.run(
            [sys.executable, str(HERE / script[0]), *script[1:]],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    took = time.monotonic() - started
    print(f"  {script[0]} with {controller_src}: exit {code} in {took:.0f} s; log {log}")
    for line in log.read_text().splitlines():
        if not line.startswith(("Traceback", "  File")):
            print(f"    {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--baseline", required=True, help="git revision to compare with")
    parser.add_argument(
        "--only", default="create,chaos,webhook", help="comma-separated: create,chaos,webhook,soak"
    )
    parser.add_argument("--sequential", type=int, default=50)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--chaos-tenants", type=int, default=100)
    parser.add_argument("--webhook-requests", type=int, default=2000)
    parser.add_argument("--webhook-api-creates", type=int, default=200)
    parser.add_argument("--soak-tenants", type=int, default=1000)
    parser.add_argument("--out", type=Path, help="directory for logs and figures")
    parser.add_argument(
        "--table-only", action="store_true", help="print the table of an earlier --out and exit"
    )
    args = parser.parse_args()
    if args.table_only:
        print_table(args.out, args.baseline)
        return

    out = args.out or Path(tempfile.mkdtemp(prefix="aitenant-compare-"))
    out.mkdir(parents=True, exist_ok=True)
    base = out / "baseline"
    if not base.exists():
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(base), args.baseline],
            check=True,
            capture_output=True,
        )
    rev = subprocess.run(
        ["git", "-C", str(base), "rev-parse", "--short", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    sides = {"baseline": base / "src", "this": REPO / "src"}
    bench.precompile(sides.values())  # both start from bytecode, as from the image
    selected = [name.strip() for name in args.only.split(",") if name.strip()]
    scripts = benchmarks(args)
    try:
        for name in selected:
            print(f"{name}:", flush=True)
            for side, src in sides.items():  # interleaved: baseline, then this, per benchmark
                run_one(scripts[name], src, out / f"{side}.json", out / f"{name}-{side}.log")
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)],
            check=False,
            capture_output=True,
        )
    print_table(out, rev)


def print_table(out: Path, rev: str) -> None:
    figures = {
        side: json.loads(path.read_text()) if (path := out / f"{side}.json").exists() else {}
        for side in ("baseline", "this")
    }
    print(f"\n| figure | baseline {rev} | this checkout |\n|---|---|---|")
    for key, label in LABELS:
        before, after = figures["baseline"].get(key), figures["this"].get(key)
        if before is not None or after is not None:
            print(f"| {label} | {bench.fmt(before)} | {bench.fmt(after)} |")
    print(f"\nlogs and figures: {out}")


if __name__ == "__main__":
    main()
