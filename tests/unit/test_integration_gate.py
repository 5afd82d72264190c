"""The integration run succeeds on an empty run only when the Juju controller is missing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).parents[1] / "integration" / "conftest.py"


def run(tmp_path: Path, module: str | None) -> subprocess.CompletedProcess[str]:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    if module is not None:
        (tmp_path / "test_charm.py").write_text(module)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def skipping(reason: str) -> str:
    return f"import pytest\npytest.skip({reason!r}, allow_module_level=True)\n"


def test_a_missing_juju_controller_is_a_success(tmp_path: Path) -> None:
    done = run(tmp_path, skipping("no Juju controller: the juju binary is not installed"))
    assert done.returncode == 0, done.stdout
    assert "1 skipped" in done.stdout


@pytest.mark.parametrize(
    "module",
    [
        skipping("set AITENANT_CONTROLLER_IMAGE to the controller image"),
        "import not_a_module\n",
        "",  # nothing collected, nothing skipped
        None,  # no test module at all
    ],
)
def test_any_other_empty_or_broken_run_fails(tmp_path: Path, module: str | None) -> None:
    assert run(tmp_path, module).returncode != 0
