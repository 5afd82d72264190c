"""The side-by-side benchmark's picture: tenants Ready over time, and API requests per tenant.

Left: for each controller, how many of the tenants created in steps 3 to 5 are Ready, against
seconds since the first of them was created. Right: each controller's API requests per tenant
lifecycle (step 2), as bars with their value written on them, so the ratio reads at a glance.
Needs matplotlib (the ``bench`` dependency group: ``uv sync --group bench``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

COLOURS = {"ours": "tab:blue", "peer": "tab:orange"}


def ready_steps(ready_s: Sequence[float]) -> tuple[list[float], list[int]]:
    """The staircase of Ready tenants: (0, 0), then one step up at each Ready time."""
    times = [0.0, *sorted(ready_s)]
    return times, list(range(len(times)))


def write(
    path: Path,
    ready_s: Mapping[str, Sequence[float]],
    requests: Mapping[str, float | None],
    subtitle: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")  # a file, no display
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5), width_ratios=(2, 1))
    for name, times in ready_s.items():
        xs, ys = ready_steps(times)
        left.step(xs, ys, where="post", label=name, color=COLOURS.get(name))
    left.set_xlabel("seconds since the first create")
    left.set_ylabel("tenants Ready")
    left.set_title("Tenants Ready over time")
    left.grid(alpha=0.3)
    left.legend()

    names = [name for name, value in requests.items() if value is not None]
    values = [float(requests[name] or 0) for name in names]
    bars = right.bar(names, values, color=[COLOURS.get(n, "tab:gray") for n in names])
    right.bar_label(bars, fmt="%.1f")
    right.set_ylabel("API requests")
    right.set_title("API requests per tenant lifecycle")
    right.grid(axis="y", alpha=0.3)

    # Wrapped: the benchmark's line on where the pods ran is longer than the figure is wide.
    title = textwrap.fill(f"AITenant controllers side by side: {subtitle}", 130)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
