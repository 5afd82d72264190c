"""scripts/check-charm-metadata.sh always checks metadata.yaml itself, charmcraft or not."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FILES = ("charmcraft.yaml", "metadata.yaml", "rockcraft.yaml", "scripts/check-charm-metadata.sh")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the files the script reads, to break on purpose."""
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def run(project: Path, *, charmcraft: bool = False) -> subprocess.CompletedProcess[str]:
    path = "/usr/bin:/bin"
    if charmcraft:
        # A charmcraft that accepts anything: the script must still run its own checks.
        fake = project / "bin"
        fake.mkdir()
        (fake / "charmcraft").write_text("#!/bin/sh\nexit 0\n")
        (fake / "charmcraft").chmod(0o755)
        path = f"{fake}:{path}"
    env = {**os.environ, "PATH": path, "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(project / "scripts/check-charm-metadata.sh")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def edit(project: Path, name: str, old: str, new: str) -> None:
    path = project / name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("charmcraft", [False, True])
def test_the_repository_files_pass(project: Path, charmcraft: bool):
    result = run(project, charmcraft=charmcraft)
    assert result.returncode == 0, result.stderr
    assert "look valid" in result.stderr


@pytest.mark.parametrize("charmcraft", [False, True])
@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("    interface: maas_api\n", "    interfce: maas_api\n", "unknown key 'interfce'"),
        ("requires:\n", "requirs:\n", "unknown key 'requirs'"),
        ("    optional: true\n", "    optinal: true\n", "unknown key 'optinal'"),
        ("    resource: controller-image\n", "    resorce: controller-image\n", "'resorce'"),
    ],
)
def test_a_typo_in_metadata_fails_naming_the_key(
    project: Path, charmcraft: bool, old: str, new: str, message: str
):
    # GIVEN metadata.yaml with a misspelt key
    edit(project, "metadata.yaml", old, new)
    # WHEN the script runs, with or without a charmcraft that accepts it
    result = run(project, charmcraft=charmcraft)
    # THEN it fails and names the key
    assert result.returncode == 1
    assert message in result.stderr


def test_a_typo_in_a_config_option_fails(project: Path):
    edit(project, "charmcraft.yaml", "      default: 10m\n", "      defualt: 10m\n")
    result = run(project)
    assert result.returncode == 1
    assert "unknown key 'defualt' in config option deletion-timeout" in result.stderr
