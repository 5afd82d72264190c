"""Pack our charms into ``.charm`` files without charmcraft.

charmcraft packs only on its build base (Ubuntu, through LXD or its own host checks), so on any
other machine we write the archive ourselves, with what Juju reads from it:

- ``metadata.yaml`` (the repository's own file, or the identity keys of a charm whose
  charmcraft.yaml carries them), ``config.yaml`` and ``actions.yaml`` from charmcraft.yaml;
- ``manifest.yaml`` listing the ``bases`` the charm runs on, from charmcraft.yaml's ``base`` and
  ``platforms`` (Juju refuses a charm without an Ubuntu base there);
- ``dispatch``, executable: the one program Juju runs for every hook and action. Ours runs
  ``src/charm.py`` with the interpreter the packages in ``venv/`` were installed for, with
  ``lib/`` and ``venv/`` on its path;
- ``venv/``: the charm's Python packages, exactly the locked versions charmcraft's uv plugin
  would install (charmcraft.yaml's ``uv-groups``; see tests/unit/test_dependencies.py), or, for
  a charm declared with ``requirements.txt``, those requirements held to the versions uv.lock
  gives the ``charm`` group;
- ``src/`` and ``lib/``.

The archive is reproducible (sorted members, one fixed timestamp, modes 0755 or 0644) and the
installed packages are cached by what decides them (the requirements uv.lock gives, the
interpreter's version) under ``~/.cache/aitenant-k8s/charm-venv/``, never in the checkout.

    python3 -m devtools.pack_charm DIR [--python PY]     (scripts/pack-charm)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from devtools.images import cache_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
TESTER_ROOT = REPO_ROOT / "tests" / "integration" / "maas_api_tester"
# The tester charm publishes maas_api data with our own library (tests/integration/test_charm.py
# copies it in the same way before packing).
TESTER_LIBRARY = Path("lib/charms/aitenant_k8s/v0/maas_api.py")
# zip cannot store dates before 1980; every member gets this one.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
# Bumped when the layout of a cached venv changes, so an old cache entry is never reused.
VENV_LAYOUT = "1"
# Never packed: byte code and caches a development run left in src/ or lib/.
SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
# The keys of charmcraft.yaml that are the charm's identity (metadata.yaml's), when a charm has
# no metadata.yaml of its own; ``title`` is metadata.yaml's ``display-name``.
METADATA_KEYS = (
    "name", "title", "summary", "description", "maintainers", "assumes", "charm-user",
    "containers", "devices", "docs", "extra-bindings", "issues", "peers", "provides",
    "requires", "resources", "source", "storage", "subordinate", "terms", "website",
)  # fmt: skip


def uv_binary() -> str:
    """The uv of the unit env (its ``uv`` package) when there is one, else the one on PATH."""
    try:
        from uv import find_uv_bin  # only the test envs install the package
    except ImportError:
        found = shutil.which("uv")
        if found is None:
            raise RuntimeError("uv is needed: python3 -m pip install uv") from None
        return found
    return find_uv_bin()


@dataclass(frozen=True)
class Interpreter:
    """The Python the charm's packages are installed for, and ``dispatch`` runs."""

    path: str
    version: str  # e.g. "3.11.2"

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @classmethod
    def find(cls, python: str) -> Interpreter:
        path = shutil.which(python)
        if path is None:
            raise RuntimeError(f"{python}: no such interpreter")
        version = subprocess.run(
            [path, "-c", "import platform; print(platform.python_version())"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return cls(path=path, version=version)


@dataclass(frozen=True)
class Charm:
    """One charm's source tree and what its charmcraft.yaml says about packing it."""

    root: Path
    charmcraft: dict

    @classmethod
    def load(cls, root: Path) -> Charm:
        return cls(root=root, charmcraft=yaml.safe_load((root / "charmcraft.yaml").read_text()))

    @property
    def name(self) -> str:
        if (self.root / "metadata.yaml").is_file():
            return yaml.safe_load((self.root / "metadata.yaml").read_text())["name"]
        return self.charmcraft["name"]

    @property
    def platform(self) -> str:
        """The one platform packed (charmcraft packs one file per platform)."""
        platforms = list(self.charmcraft.get("platforms") or {})
        if platforms != ["amd64"]:
            raise RuntimeError(f"{self.root}: only platforms [amd64] can be packed: {platforms}")
        return platforms[0]

    @property
    def locked(self) -> bool:
        """Built by charmcraft's uv plugin: its packages are exactly uv.lock's."""
        part = (self.charmcraft.get("parts") or {}).get("charm") or {}
        return part.get("plugin") == "uv"

    def file_name(self) -> str:
        """charmcraft's own name for the file: ``<name>_<platform>.charm``."""
        return f"{self.name}_{self.platform}.charm"


def manifest_yaml(charm: Charm) -> str:
    """The bases the charm runs on: charmcraft.yaml's ``base`` for each of its platforms."""
    distribution, _, channel = str(charm.charmcraft["base"]).partition("@")
    if distribution != "ubuntu" or not channel:
        raise RuntimeError(f"{charm.root}: Juju runs charms on Ubuntu bases only: {distribution}")
    bases = [{"name": distribution, "channel": channel, "architectures": [charm.platform]}]
    return yaml.safe_dump({"bases": bases}, sort_keys=True)


def metadata_yaml(charm: Charm) -> bytes:
    """The charm's metadata.yaml as is, else the identity keys of its charmcraft.yaml."""
    own = charm.root / "metadata.yaml"
    if own.is_file():
        return own.read_bytes()
    metadata = {key: charm.charmcraft[key] for key in METADATA_KEYS if key in charm.charmcraft}
    if "title" in metadata:
        metadata["display-name"] = metadata.pop("title")
    return yaml.safe_dump(metadata, sort_keys=True).encode()


def section_yaml(charm: Charm, key: str) -> bytes | None:
    """charmcraft.yaml's ``config`` or ``actions`` as config.yaml / actions.yaml; None without."""
    if key not in charm.charmcraft:
        return None
    return yaml.safe_dump(charm.charmcraft[key], sort_keys=True).encode()


def dispatch_script(interpreter: Interpreter) -> bytes:
    """The program Juju runs for every event (JUJU_DISPATCH_PATH names the event)."""
    return f"""#!/bin/sh
# Written by scripts/pack-charm. Juju runs this for every hook and action; ops reads which one
# from JUJU_DISPATCH_PATH. venv/ holds packages installed for Python {interpreter.minor}.
charm_dir="$(cd "$(dirname "$0")" && pwd)"
export PYTHONPATH="$charm_dir/lib:$charm_dir/venv${{PYTHONPATH:+:$PYTHONPATH}}"
JUJU_DISPATCH_PATH="${{JUJU_DISPATCH_PATH:-$0}}" exec python{interpreter.minor} \\
    "$charm_dir/src/charm.py"
""".encode()


# --- the charm's Python packages ---


def _uv_export(project: Path, *selection: str) -> str:
    """The locked requirements ``selection`` picks from ``project``'s uv.lock, pinned."""
    return subprocess.run(
        [
            *(uv_binary(), "export", "--frozen", "--no-hashes", "--no-annotate", "--no-header"),
            *selection,
        ],
        cwd=project,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def charm_requirements(charm: Charm) -> str:
    """What goes into ``venv/``: for a uv-plugin charm, what charmcraft's plugin would install
    (``uv sync --no-dev --group <g> --no-install-project``: [project].dependencies plus the
    groups); for a requirements.txt charm, its requirements."""
    if charm.locked:
        part = charm.charmcraft["parts"]["charm"]
        groups = [f"--group={group}" for group in part.get("uv-groups") or []]
        return _uv_export(charm.root, "--no-dev", "--no-emit-project", *groups)
    requirements = charm.root / "requirements.txt"
    return requirements.read_text() if requirements.is_file() else ""


def charm_constraints() -> str:
    """The versions uv.lock gives the ``charm`` group: what a requirements.txt charm of ours
    (the tester) is held to, so it installs the same ops and pydantic as ours."""
    return _uv_export(REPO_ROOT, "--only-group=charm", "--no-emit-project")


def _install(
    requirements: str, constraints: str, interpreter: Interpreter, target: Path, *, locked: bool
) -> None:
    with tempfile.TemporaryDirectory(prefix="pack-charm-") as tmp:
        req, con = Path(tmp) / "requirements.txt", Path(tmp) / "constraints.txt"
        req.write_text(requirements)
        con.write_text(constraints)
        subprocess.run(
            [
                *(uv_binary(), "pip", "install", "--quiet", "--no-config"),
                *("--python", interpreter.path, "--target", str(target)),
                *("--requirement", str(req), "--constraint", str(con)),
                # every file of the venv gets the archive's fixed time anyway
                "--no-compile",
                # a locked export is already the whole closure: nothing is resolved again
                *(["--no-deps"] if locked else []),
            ],
            check=True,
            env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        )


def charm_venv(charm: Charm, interpreter: Interpreter) -> Path:
    """The installed packages of ``charm``, built once per requirements and interpreter."""
    requirements = charm_requirements(charm)
    constraints = "" if charm.locked else charm_constraints()
    key = hashlib.sha256(
        "\0".join([VENV_LAYOUT, interpreter.version, requirements, constraints]).encode()
    ).hexdigest()[:16]
    cached = cache_dir() / "charm-venv" / f"{charm.name}-py{interpreter.minor}-{key}"
    if cached.is_dir():
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{cached.name}-", dir=cached.parent))
    try:
        _install(requirements, constraints, interpreter, building, locked=charm.locked)
        building.rename(cached)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return cached


# --- the archive ---


def _tree(root: Path, prefix: str) -> Iterator[tuple[str, Path]]:
    """(member name, file) for every file under ``root``, caches left out."""
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if SKIPPED_PARTS & set(relative.parts) or path.suffix == ".pyc":
            continue
        if path.is_file():
            yield f"{prefix}/{relative.as_posix()}", path


def _mode(path: Path) -> int:
    return 0o755 if path.stat().st_mode & stat.S_IXUSR else 0o644


def _write(archive: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    # The unix mode in the upper half: Juju runs `dispatch` and src/charm.py only if executable.
    info.external_attr = (stat.S_IFREG | mode) << 16
    archive.writestr(info, data)


def _members(charm: Charm, interpreter: Interpreter) -> Iterator[tuple[str, bytes, int]]:
    yield "dispatch", dispatch_script(interpreter), 0o755
    yield "manifest.yaml", manifest_yaml(charm).encode(), 0o644
    yield "metadata.yaml", metadata_yaml(charm), 0o644
    for key, name in (("config", "config.yaml"), ("actions", "actions.yaml")):
        if (content := section_yaml(charm, key)) is not None:
            yield name, content, 0o644
    files = dict(_tree(charm.root / "src", "src"))
    if (charm.root / "lib").is_dir():
        files |= dict(_tree(charm.root / "lib", "lib"))
    if charm.root == TESTER_ROOT:
        files[TESTER_LIBRARY.as_posix()] = REPO_ROOT / TESTER_LIBRARY
    files |= dict(_tree(charm_venv(charm, interpreter), "venv"))
    for name, path in files.items():
        yield name, path.read_bytes(), _mode(path)


def pack(root: Path, out_dir: Path, interpreter: Interpreter) -> Path:
    """Pack the charm at ``root`` into ``out_dir``; the path of the ``.charm``."""
    charm = Charm.load(root)
    members = sorted(_members(charm, interpreter))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / charm.file_name()
    partial = target.with_name(f".{target.name}.partial")
    with zipfile.ZipFile(partial, "w") as archive:
        for name, data, mode in members:
            _write(archive, name, data, mode)
    partial.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/pack-charm",
        description="Pack aitenant-k8s and the maas-api-tester charm into DIR as charmcraft would.",
    )
    parser.add_argument("dir", type=Path, help="where the .charm files are written")
    parser.add_argument(
        "--python",
        default="python3",
        help="the Python the charm's packages are installed for and dispatch runs "
        "(default: python3; Debian 12's python3.11 matches our charm-base image)",
    )
    args = parser.parse_args(argv)
    interpreter = Interpreter.find(args.python)
    for root in (REPO_ROOT, TESTER_ROOT):
        started = time.monotonic()
        packed = pack(root, args.dir, interpreter)
        print(f"{packed} (Python {interpreter.minor}, {time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
