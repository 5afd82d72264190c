"""What the benchmarks share with ``benchmarks/compare.py``.

* ``record``: a figure a benchmark measured, added to the JSON file named by
  ``AITENANT_BENCH_FIGURES`` (when set), so the comparison can print it next to the baseline's.
* ``controller_env``: the environment of a controller process; with
  ``AITENANT_BENCH_CONTROLLER_SRC`` set, the controller runs from that source tree (e.g. a
  worktree of the commit to compare with) while the benchmark itself runs from this one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

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
