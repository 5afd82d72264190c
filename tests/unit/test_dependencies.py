"""Every package our code imports directly is declared, in the right place (pyproject.toml).

- the controller (``src/aitenant``, minus the test harness) imports only the project's
  dependencies;
- the charm (``src/charm.py``, its package ``src/aitenant_charm``, ``lib/`` and the
  ``aitenant`` modules the charm loads) imports only the ``charm`` dependency group: the charm's
  virtual environment holds nothing else.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
CHARM_PACKAGE = SRC / "aitenant_charm"
# Top-level names of our own code (src/, lib/), never a distribution on PyPI.
OURS = {"aitenant", "aitenant_charm", "charm", "charms"}


def _normalise(requirement: str) -> str:
    name = re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _imported_distributions(files: list[Path]) -> dict[str, set[str]]:
    """``{distribution: {file, ...}}`` of the third-party imports in ``files``."""
    by_module = importlib.metadata.packages_distributions()
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in OURS or top == "__future__":
                    continue
                for dist in by_module.get(top, [top]):
                    found.setdefault(_normalise(dist), set()).add(str(path.relative_to(ROOT)))
    return found


def test_controller_imports_are_project_dependencies():
    files = list((SRC / "aitenant").rglob("*.py"))
    declared = {_normalise(r) for r in _pyproject()["project"]["dependencies"]}
    missing = {d: sorted(f) for d, f in _imported_distributions(files).items() if d not in declared}
    assert not missing, f"imported but not in [project].dependencies: {missing}"


def _fresh_python(code: str) -> str:
    """What ``code`` prints in a new interpreter that sees only our source trees."""
    return subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": f"{SRC}:{ROOT / 'lib'}", "PATH": "/usr/bin:/bin"},
    ).stdout


def test_the_controller_does_not_load_pydantic():
    # pydantic is the charm's; in the controller it cost 140 ms and 8 MB at every start
    # (docs/design.md §9.4).
    code = "import sys, aitenant.app; print(sorted(m for m in sys.modules if 'pydantic' in m))"
    assert _fresh_python(code).strip() == "[]"


def _modules_the_charm_loads() -> list[Path]:
    code = (
        "import json, sys; import charm; "
        "print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items() "
        "if n.split('.')[0] == 'aitenant' and getattr(m, '__file__', None))))"
    )
    return [Path(p) for p in json.loads(_fresh_python(code))]


def test_charm_imports_are_exactly_in_the_charm_group():
    files = [
        SRC / "charm.py",
        *CHARM_PACKAGE.rglob("*.py"),
        *(ROOT / "lib").rglob("*.py"),
        *_modules_the_charm_loads(),
    ]
    group = {_normalise(r) for r in _pyproject()["dependency-groups"]["charm"]}
    imported = _imported_distributions(files)
    missing = {d: sorted(f) for d, f in imported.items() if d not in group}
    assert not missing, f"the charm imports these, the charm group lacks them: {missing}"
    # AND the group carries nothing the charm does not import (lightkube-models is the
    # model half of lightkube, imported through lightkube.resources/models)
    unused = group - set(imported) - {"lightkube-models"}
    assert not unused, f"in the charm group but never imported by the charm: {sorted(unused)}"
