"""The charm's import boundary: what it loads from the controller package.

The import-linter contract "the charm imports from aitenant only what runs in the charm
container" (pyproject.toml) checks the ``aitenant_charm`` package statically. ``src/charm.py`` is
a top-level module import-linter does not analyse, and a module added to ``aitenant`` after the
contract's list would pass it, so this test imports the charm and every module of its package in
a fresh interpreter and checks which ``aitenant`` modules really got loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).parents[3] / "src"
PACKAGE = SRC / "aitenant_charm"
ALLOWED = {"aitenant", "aitenant.manifests", "aitenant.contract", "aitenant.certificates",
           "aitenant.kubernetes_version", "aitenant.settings", "aitenant.webhook",
           "aitenant.webhook.config"}  # fmt: skip


def _charm_modules() -> list[str]:
    """``charm`` and every module of ``aitenant_charm``, by import name."""
    package = [
        ".".join(("aitenant_charm", *p.relative_to(PACKAGE).with_suffix("").parts))
        for p in sorted(PACKAGE.rglob("*.py"))
    ]
    return ["charm", *(m.removesuffix(".__init__") for m in package)]


def test_the_charm_loads_only_the_modules_its_contract_allows() -> None:
    modules = _charm_modules()
    assert {"charm", "aitenant_charm", "aitenant_charm.api_server_reads"} <= set(modules)
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
