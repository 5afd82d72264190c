"""The charm's import boundary: what its modules load from the controller package.

import-linter analyses packages, and the charm's modules are top-level modules (src/charm*.py),
so this test checks the charm side; the contract "what the charm may import from aitenant
stays free of the controller" in pyproject.toml checks that those modules pull in nothing more.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).parents[3] / "src"
ALLOWED = {"aitenant", "aitenant.manifests", "aitenant.contract",
           "aitenant.kubernetes_version", "aitenant.settings", "aitenant.webhook",
           "aitenant.webhook.config"}  # fmt: skip


def test_the_charm_loads_only_the_modules_its_contract_allows() -> None:
    modules = sorted(p.stem for p in SRC.glob("charm*.py"))
    assert "charm" in modules
    probe = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'aitenant')))"
    )
    lib = SRC.parent / "lib"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": f"{SRC}:{lib}", "PATH": ""},
    )
    loaded = set(json.loads(done.stdout))
    assert "aitenant.contract" in loaded, "the probe really imported the charm"
    assert loaded - ALLOWED == set()
