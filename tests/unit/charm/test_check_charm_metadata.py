"""scripts/check_charm_metadata.py: charmcraft's own validation and ours, each catching what the
other lets through."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

from check_charm_metadata import charmcraft_errors, main, our_errors  # noqa: E402

FILES = ("charmcraft.yaml", "metadata.yaml", "rockcraft.yaml")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the files the script reads, to break on purpose."""
    for name in FILES:
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def edit(project: Path, name: str, old: str, new: str) -> None:
    path = project / name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_the_repository_files_pass(project: Path):
    assert charmcraft_errors(project) == []
    assert our_errors(project) == []
    assert main(["check", str(project)]) == 0


# Misspelt keys and values charmcraft refuses (through expand-extensions or its models) and our
# check lets through: it does not restate charmcraft's schemas.
@pytest.mark.parametrize(
    ("name", "old", "new", "message"),
    [
        # a part key of the uv plugin's schema
        (
            "charmcraft.yaml",
            "    build-snaps:",
            "    build-snap:",
            "parts.build-snap: Extra inputs",
        ),
        ("charmcraft.yaml", "    source: .\n", "    sourse: .\n", "parts.source: Field required"),
        # a URL in metadata.yaml (CharmMetadata)
        (
            "metadata.yaml",
            "website: https://",
            "website: hxxps//",
            "metadata.yaml: website",
        ),
    ],
)
def test_charmcraft_refuses_what_our_check_misses(
    project: Path, name: str, old: str, new: str, message: str
):
    edit(project, name, old, new)
    assert our_errors(project) == []
    errors = charmcraft_errors(project)
    assert any(message in error for error in errors), errors


# Misspelt keys our check refuses and charmcraft 4.5.0 accepts: CharmMetadata ignores unknown
# keys, and expand-extensions does not look inside an action.
@pytest.mark.parametrize(
    ("name", "old", "new", "message"),
    [
        ("metadata.yaml", "    interface: maas_api\n", "    interfce: maas_api\n", "'interfce'"),
        ("metadata.yaml", "requires:\n", "requirs:\n", "unknown key 'requirs'"),
        ("metadata.yaml", "    optional: true\n", "    optinal: true\n", "unknown key 'optinal'"),
        ("metadata.yaml", "    resource: controller-image\n", "    resorce: x\n", "'resorce'"),
        (
            "charmcraft.yaml",
            "  prepare-removal:\n",
            "  prepare-removal:\n    parallell: true\n",
            "unknown key 'parallell' in action prepare-removal",
        ),
    ],
)
def test_our_check_refuses_what_charmcraft_misses(
    project: Path, name: str, old: str, new: str, message: str
):
    edit(project, name, old, new)
    assert charmcraft_errors(project) == []
    errors = our_errors(project)
    assert any(message in error for error in errors), errors


# What the lint must refuse through charmcraft's own code.
@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "\nactions:\n",
            "\nactoins:\n",
            "charmcraft.yaml: charmcraft expand-extensions refused it: "
            "1 validation error for PlatformCharm: actoins: Extra inputs are not permitted",
        ),
        (
            "    uv-groups: [charm]\n",
            "    uv-group: [charm]\n",
            "parts.uv-group: Extra inputs are not permitted",
        ),
        (
            "      default: 10m\n",
            "      defualt: 10m\n",
            "charmcraft.yaml: config.options.deletion-timeout.string.defualt: "
            "Extra inputs are not permitted",
        ),
        (
            "      type: string\n      default: 10m\n",
            "      type: strng\n      default: 10m\n",
            "charmcraft.yaml: config.options.deletion-timeout: Input tag 'strng' found using "
            "'type' does not match any of the expected tags",
        ),
    ],
)
def test_charmcraft_refuses_a_misspelt_key_or_type(project: Path, old: str, new: str, message: str):
    edit(project, "charmcraft.yaml", old, new)
    errors = charmcraft_errors(project)
    assert any(message in error for error in errors), errors


def test_the_script_fails_naming_the_error_on_one_line(project: Path):
    # GIVEN a misspelt top-level key
    edit(project, "charmcraft.yaml", "\nactions:\n", "\nactoins:\n")
    # WHEN the lint env's command runs
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts/check_charm_metadata.py"), str(project)],
        capture_output=True,
        text=True,
        check=False,
    )
    # THEN it fails; charmcraft's report is one line, and ours follows
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0] == (
        "check-charm-metadata: charmcraft.yaml: charmcraft expand-extensions refused it: "
        "1 validation error for PlatformCharm: actoins: Extra inputs are not permitted"
    )
    assert "check-charm-metadata: charmcraft.yaml: missing key actions" in lines
