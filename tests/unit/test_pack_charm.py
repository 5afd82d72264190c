"""The .charm files scripts/pack-charm writes hold what Juju reads, as charmcraft would pack them.

Packing installs the charm's locked packages once per requirements and interpreter into
~/.cache/aitenant-k8s/charm-venv (about 3 s cold with a warm uv cache; network only on the very
first run), then writes the zip (about 2 s): the module packs each charm once.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from devtools import pack_charm
from devtools.pack_charm import REPO_ROOT, TESTER_LIBRARY, TESTER_ROOT, Charm, Interpreter

INTERPRETER = Interpreter.find(sys.executable)


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("charms")
    return {
        "aitenant-k8s": pack_charm.pack(REPO_ROOT, out, INTERPRETER),
        "maas-api-tester": pack_charm.pack(TESTER_ROOT, out, INTERPRETER),
    }


@pytest.fixture(scope="module")
def unpacked(packed: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("aitenant-k8s")
    with zipfile.ZipFile(packed["aitenant-k8s"]) as archive:
        for info in archive.infolist():
            archive.extract(info, out)
            # zipfile drops the modes: restore them from the member, as Juju's unpacking does
            os.chmod(out / info.filename, (info.external_attr >> 16) & 0o777)
    return out


def _mode(archive: Path, name: str) -> int:
    with zipfile.ZipFile(archive) as zf:
        return zf.getinfo(name).external_attr >> 16


def _read(archive: Path, name: str) -> bytes:
    with zipfile.ZipFile(archive) as zf:
        return zf.read(name)


def test_the_files_are_named_as_charmcraft_names_them(packed: dict[str, Path]):
    assert packed["aitenant-k8s"].name == "aitenant-k8s_amd64.charm"
    assert packed["maas-api-tester"].name == "maas-api-tester_amd64.charm"


@pytest.mark.parametrize("charm", ["aitenant-k8s", "maas-api-tester"])
def test_dispatch_and_the_entry_point_are_executable_files(packed: dict[str, Path], charm: str):
    for name in ("dispatch", "src/charm.py"):
        mode = _mode(packed[charm], name)
        assert stat.S_ISREG(mode), name
        assert mode & 0o111 == 0o111, f"{name}: {oct(mode)}"
    assert _mode(packed[charm], "metadata.yaml") & 0o777 == 0o644


@pytest.mark.parametrize("charm", ["aitenant-k8s", "maas-api-tester"])
def test_the_manifest_lists_the_ubuntu_base_of_charmcraft_yaml(packed: dict[str, Path], charm: str):
    root = REPO_ROOT if charm == "aitenant-k8s" else TESTER_ROOT
    charmcraft = yaml.safe_load((root / "charmcraft.yaml").read_text())
    manifest = yaml.safe_load(_read(packed[charm], "manifest.yaml"))
    name, channel = charmcraft["base"].split("@")
    assert name == "ubuntu"  # Juju refuses any other
    assert manifest["bases"] == [
        {"name": name, "channel": channel, "architectures": list(charmcraft["platforms"])}
    ]


def test_metadata_is_the_repositorys_and_config_and_actions_are_charmcraft_yamls(
    packed: dict[str, Path],
):
    charm = packed["aitenant-k8s"]
    assert _read(charm, "metadata.yaml") == (REPO_ROOT / "metadata.yaml").read_bytes()
    charmcraft = yaml.safe_load((REPO_ROOT / "charmcraft.yaml").read_text())
    assert yaml.safe_load(_read(charm, "config.yaml")) == charmcraft["config"]
    assert yaml.safe_load(_read(charm, "actions.yaml")) == charmcraft["actions"]


def test_src_and_lib_are_packed_without_byte_code(packed: dict[str, Path]):
    with zipfile.ZipFile(packed["aitenant-k8s"]) as archive:
        names = set(archive.namelist())
    ours = {
        p.relative_to(REPO_ROOT).as_posix()
        for top in ("src", "lib")
        for p in (REPO_ROOT / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert "src/charm.py" in ours
    assert ours <= names, sorted(ours - names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_venv_alone_imports_the_charm(unpacked: Path):
    # -S: nothing of the test environment's site-packages; every package comes from venv/
    code = (
        "import sys; sys.path.insert(0, 'src'); import ops, lightkube, pydantic, charm; "
        "print('\\n'.join(m.__file__ for m in (ops, lightkube, pydantic)))"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=unpacked,
        env={"PYTHONPATH": "lib:venv", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for path in result.stdout.split():
        assert Path(path).is_relative_to(unpacked / "venv"), path


def test_the_venv_holds_the_charm_group_and_no_controller_package(unpacked: Path):
    installed = {p.name.split("-")[0].lower() for p in (unpacked / "venv").glob("*.dist-info")}
    assert {"ops", "lightkube", "pydantic", "cryptography"} <= installed
    assert not {"aiohttp", "prometheus_client", "aitenant_k8s"} & installed


def test_dispatch_runs_src_charm_py_with_lib_and_venv_on_the_path(unpacked: Path, tmp_path: Path):
    # GIVEN an interpreter of the version the venv was built for that reports how it was run
    shim = tmp_path / f"python{INTERPRETER.minor}"
    shim.write_text(
        '#!/bin/sh\necho "args=$*"\necho "PYTHONPATH=$PYTHONPATH"\n'
        'echo "JUJU_DISPATCH_PATH=$JUJU_DISPATCH_PATH"\n'
    )
    shim.chmod(0o755)
    # WHEN Juju runs dispatch for a hook, from the charm's directory
    result = subprocess.run(
        ["./dispatch"],
        cwd=unpacked,
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", "JUJU_DISPATCH_PATH": "hooks/install"},
        capture_output=True,
        text=True,
        check=True,
    )
    # THEN the charm's entry point runs with lib/ and venv/ first on its path
    assert result.stdout.splitlines() == [
        f"args={unpacked}/src/charm.py",
        f"PYTHONPATH={unpacked}/lib:{unpacked}/venv",
        "JUJU_DISPATCH_PATH=hooks/install",
    ]


def test_the_tester_carries_our_maas_api_library_and_the_locked_ops(packed: dict[str, Path]):
    tester, ours = packed["maas-api-tester"], packed["aitenant-k8s"]
    library = TESTER_LIBRARY.as_posix()
    assert _read(tester, library) == (REPO_ROOT / TESTER_LIBRARY).read_bytes()
    metadata = yaml.safe_load(_read(tester, "metadata.yaml"))
    assert metadata["name"] == "maas-api-tester"
    assert metadata["provides"]["maas-api"]["interface"] == "maas_api"
    with zipfile.ZipFile(tester) as t, zipfile.ZipFile(ours) as o:
        ops_in = [
            {n.split("/")[1] for n in z.namelist() if n.startswith("venv/ops-")} for z in (t, o)
        ]
    assert len(ops_in[0]) == 1, ops_in
    assert ops_in[0] == ops_in[1]


def test_a_second_pack_is_byte_identical(packed: dict[str, Path], tmp_path: Path):
    again = pack_charm.pack(TESTER_ROOT, tmp_path, INTERPRETER)
    assert again.read_bytes() == packed["maas-api-tester"].read_bytes()


def test_the_venv_is_cached_outside_the_checkout():
    venv = pack_charm.charm_venv(Charm.load(REPO_ROOT), INTERPRETER)
    assert (venv / "ops").is_dir()
    assert not venv.is_relative_to(REPO_ROOT)


def test_only_ubuntu_bases_are_packed(tmp_path: Path):
    (tmp_path / "charmcraft.yaml").write_text(
        "name: x\nbase: debian@12\nplatforms:\n  amd64:\nparts: {}\n"
    )
    with pytest.raises(RuntimeError, match="Ubuntu bases only"):
        pack_charm.manifest_yaml(Charm.load(tmp_path))
