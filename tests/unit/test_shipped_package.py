"""The wheel (and so the rock, which installs it) ships the controller and nothing of the tests.

The wheel is built here with the project's own build backend and configuration, then read:
it holds exactly ``src/aitenant`` (its modules, manifests and templates, so every path the
product resolves exists in the image) and no module of it imports test code or a package only
the test dependency groups install.
"""

from __future__ import annotations

import ast
import re
import tomllib
import zipfile
from pathlib import Path

import pytest
from hatchling.builders.wheel import WheelBuilder

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "aitenant"


def _module_name(requirement: str) -> str:
    name = re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0]
    return re.sub(r"[-.]+", "_", name).lower()


def _test_only_modules() -> set[str]:
    """Top-level modules of the packages the test groups add to the runtime dependencies, and
    the repository's own test and dev-tool packages."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime = {_module_name(r) for r in pyproject["project"]["dependencies"]}
    groups = pyproject["dependency-groups"]
    test_only = {
        _module_name(r)
        for group in ("unit", "e2e")
        for r in groups[group]
        if isinstance(r, str) and _module_name(r) not in runtime
    }
    return test_only | {"tests", "devtools"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    built = list(WheelBuilder(str(ROOT)).build(directory=str(out), versions=["standard"]))
    assert len(built) == 1, built
    return zipfile.ZipFile(built[0])


def _top_level_imports(source: str) -> set[str]:
    tops: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            tops.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    return tops


def test_test_only_packages_are_known():
    # Guards the check below against passing on an empty set.
    assert {"trustme", "pytest", "hypothesis", "tests", "devtools"} <= _test_only_modules()


def test_the_wheel_holds_exactly_the_aitenant_package(wheel: zipfile.ZipFile):
    names = [n for n in wheel.namelist() if ".dist-info/" not in n]
    shipped = {
        str(p.relative_to(PACKAGE.parent))
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert set(names) == shipped
    assert not [n for n in names if n.startswith(("tests/", "devtools/", "aitenant/testing/"))]


def test_no_shipped_module_imports_test_code(wheel: zipfile.ZipFile):
    forbidden = _test_only_modules()
    modules = [n for n in wheel.namelist() if n.endswith(".py")]
    assert "aitenant/__main__.py" in modules
    offenders = {
        name: sorted(_top_level_imports(wheel.read(name).decode()) & forbidden) for name in modules
    }
    assert not {name: found for name, found in offenders.items() if found}


def test_the_check_sees_a_test_import():
    source = "import trustme\nfrom devtools import samples\n"
    assert _top_level_imports(source) & _test_only_modules() == {"trustme", "devtools"}
