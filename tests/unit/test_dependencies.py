"""Every package our code imports directly is declared, in the right place (pyproject.toml), and
each container gets what it is declared to get.

- the controller (``src/aitenant``, minus the test harness) imports only the project's
  dependencies and its ``controller`` extra, and rockcraft.yaml's build installs both;
- the charm (``src/charm.py``, its package ``src/aitenant_charm``, ``lib/`` and the
  ``aitenant`` modules the charm loads) imports exactly the ``charm`` dependency group;
- the charm's virtual environment, as charmcraft's uv plugin builds it from uv.lock (its
  ``uv sync --group charm`` adds the group to ``[project].dependencies``), holds the ``charm``
  group's closure and nothing else: no controller-only package.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from charmcraft.parts.plugins import UvPlugin as CharmcraftUvPlugin
from craft_parts.infos import PartInfo, ProjectInfo
from craft_parts.parts import Part
from craft_parts.plugins.uv_plugin import UvPlugin, UvPluginProperties
from packaging.markers import Marker
from uv import find_uv_bin

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
    project = _pyproject()["project"]
    declared = {
        _normalise(r)
        for r in [*project["dependencies"], *project["optional-dependencies"]["controller"]]
    }
    missing = {d: sorted(f) for d, f in _imported_distributions(files).items() if d not in declared}
    assert not missing, f"imported but in neither [project].dependencies nor the extra: {missing}"


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


# --- what each build installs, asked of the locked uv with the plugins' own commands ---

# The charm's container: Ubuntu 24.04's CPython (charmcraft.yaml's base) on amd64; uv.lock's
# environment markers are evaluated for it.
CHARM_PLATFORM = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}


def _sync_command(plugin_class: type[UvPlugin], part_yaml: dict, work: Path) -> list[str]:
    """The ``uv sync`` command ``plugin_class`` runs to build the part ``part_yaml``."""
    properties = UvPluginProperties.unmarshal(part_yaml)
    # The part's own keys; the plugin's (uv-*) travel as its properties.
    spec = {k: v for k, v in part_yaml.items() if not k.startswith("uv-")}
    part = Part("part", spec, plugin_properties=properties)
    info = ProjectInfo(application_name="charmcraft", cache_dir=work, work_dir=work)
    plugin = plugin_class(properties=properties, part_info=PartInfo(project_info=info, part=part))
    syncs = [c for c in plugin.get_build_commands() if c.startswith("uv sync ")]
    assert len(syncs) == 1, plugin.get_build_commands()
    return shlex.split(syncs[0])


def _installed_by(project: Path, sync: list[str]) -> set[str]:
    """The distributions ``sync`` (a ``uv sync`` command) installs from ``project``'s uv.lock, on
    the charm's platform: ``uv export`` with the same selection, which installs nothing.
    An option export does not know makes uv fail, so a new plugin flag is never ignored."""
    assert sync[:2] == ["uv", "sync"], sync
    translated = {"--reinstall": None, "--no-install-project": "--no-emit-project"}
    options = [translated.get(o, o) for o in sync[2:] if translated.get(o, o) is not None]
    exported = subprocess.run(
        [
            find_uv_bin(),
            "export",
            "--frozen",
            "--no-hashes",
            "--no-annotate",
            "--no-header",
            *options,
        ],
        cwd=project,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    names: set[str] = set()
    for line in exported.splitlines():
        requirement, _, marker = line.partition(";")
        if not requirement.strip() or requirement.startswith(("#", " ")):
            continue
        if marker.strip() and not Marker(marker.strip()).evaluate(CHARM_PLATFORM):
            continue
        if requirement.strip() in {".", "-e ."}:  # the project itself
            names.add(_normalise(_pyproject()["project"]["name"]))
            continue
        assert "==" in requirement, line
        names.add(_normalise(requirement))
    return names


def _charm_environment(project: Path, work: Path) -> set[str]:
    """What charmcraft's uv plugin installs into the charm for ``project``'s charmcraft.yaml."""
    part = yaml.safe_load((project / "charmcraft.yaml").read_text())["parts"]["charm"]
    return _installed_by(project, _sync_command(CharmcraftUvPlugin, part, work))


def _charm_group_closure(project: Path) -> set[str]:
    """The intended set: the ``charm`` group and what it needs, nothing of the project's."""
    return _installed_by(project, ["uv", "sync", "--only-group", "charm", "--no-install-project"])


def test_the_charm_environment_is_the_charm_groups_closure(tmp_path: Path):
    environment = _charm_environment(ROOT, tmp_path)
    intended = _charm_group_closure(ROOT)
    assert "ops" in intended  # the comparison sees the group at all
    assert environment == intended, (
        f"the plugin would add {sorted(environment - intended)} "
        f"and leave out {sorted(intended - environment)}"
    )


def test_the_project_dependencies_are_all_in_the_charm_group():
    # The plugin installs [project].dependencies into the charm whatever its flags: they are
    # the charm's too, or they belong to the controller's extra.
    project = {_normalise(r) for r in _pyproject()["project"]["dependencies"]}
    group = {_normalise(r) for r in _pyproject()["dependency-groups"]["charm"]}
    assert project <= group, f"not needed by the charm: {sorted(project - group)}"


def test_a_controller_package_in_the_project_dependencies_would_enter_the_charm(tmp_path: Path):
    # GIVEN the project as it is, but with aiohttp moved up from the controller's extra to
    # [project].dependencies (edited in the lock, which is what the plugin reads: --frozen)
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "uv.lock", "charmcraft.yaml"):
        shutil.copy(ROOT / name, project / name)
    lock = (project / "uv.lock").read_text()
    root = 'source = { editable = "." }\ndependencies = [\n'
    assert lock.count(root) == 1
    (project / "uv.lock").write_text(lock.replace(root, root + '    { name = "aiohttp" },\n'))
    # WHEN the charm's environment is computed as above
    environment = _charm_environment(project, tmp_path)
    # THEN aiohttp and its helpers are in it, and the comparison the test above makes fails
    assert {"aiohttp", "multidict", "yarl"} <= environment - _charm_group_closure(project)


def test_the_rock_installs_the_project_and_the_controllers_extra(tmp_path: Path):
    rock = yaml.safe_load((ROOT / "rockcraft.yaml").read_text())
    (part,) = rock["parts"].values()
    sync = _sync_command(UvPlugin, part, tmp_path)
    installed = _installed_by(ROOT, sync)
    assert "aitenant-k8s" in installed  # rockcraft installs the project itself (its wheel)
    extra = _pyproject()["project"]["optional-dependencies"]["controller"]
    declared = {_normalise(r) for r in [*_pyproject()["project"]["dependencies"], *extra]}
    assert declared <= installed, f"the rock would lack {sorted(declared - installed)}"
    # and nothing only the charm runs
    assert not {"ops", "pydantic", "charmcraft"} & installed
